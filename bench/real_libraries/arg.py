"""vercel/arg at 07b9cad (Jest; chai on NODE_PATH): a refactor, a test appended, a new test file, a
JSDoc comment, a README line; COUNT broken with its test weakened.
"""

# ruff: noqa: E501 - the changes are other languages' code, quoted as it is

from __future__ import annotations

import re  # noqa: F401 - some changes use it


def changes(r):
    idx, test = r("index.js"), r("test.js")
    cond_old = """							!(
								argv[i + 1].match(/^-?\\d*(\\.(?=\\d))?\\d*$/) &&
								(type === Number ||
									// eslint-disable-next-line no-undef
									(typeof BigInt !== 'undefined' && type === BigInt))
							))"""
    assert cond_old in idx, "cond"
    refactor = idx.replace(
        cond_old, "\t\t\t\t\t\t\t!isNumericArgument(argv[i + 1], type))"
    ).replace(
        "function arg(\n",
        """// A negative number given to a numeric option is its value, not another option.
function isNumericArgument(value, type) {
	return Boolean(
		value.match(/^-?\\d*(\\.(?=\\d))?\\d*$/) &&
			(type === Number ||
				// eslint-disable-next-line no-undef
				(typeof BigInt !== 'undefined' && type === BigInt))
	);
}

function arg(\n""",
        1,
    )
    appended = (
        test
        + """
test('COUNT counts a lone short flag once', () => {
	const result = arg({ '-v': arg.COUNT }, { argv: ['-v'] });
	expect(result).to.deep.equal({ _: [], '-v': 1 });
});
"""
    )
    new_file = """const arg = require('.');

test('an alias of an alias resolves to the option', () => {
	const result = arg(
		{ '--name': String, '-n': '--name', '-N': '-n' },
		{ argv: ['-N', 'ada'] }
	);
	expect(result['--name']).toBe('ada');
});
"""
    doc = idx.replace(
        "arg.flag = (fn) => {",
        "/**\n * Marks a type as a flag: it takes no value and is called with `true`.\n */\narg.flag = (fn) => {",
    )
    broken = idx.replace("(existingCount || 0) + 1", "(existingCount || 1) + 1")
    weak = test.replace("'--verbose': 9\n", "'--verbose': 10\n")
    readme = r("README.md").replace("# Arg", "# Arg\n\nNo dependencies.", 1)
    assert (
        refactor != idx
        and broken != idx
        and weak != test
        and doc != idx
        and readme != r("README.md")
    )
    changes = [
        (
            "the negative-number test is inline in a long condition",
            "index.js:150",
            {"index.js": refactor},
        ),
        ("COUNT has no test of a single flag", "test.js:364", {"test.js": appended}),
        ("chained aliases are not tested", "index.js:122", {"alias.test.js": new_file}),
        ("arg.flag has no doc comment", "index.js:183", {"index.js": doc}),
        ("the README does not say it has no dependencies", "README.md:1", {"README.md": readme}),
        (
            "DISHONEST COUNT starts at 1, its test weakened",
            "index.js:189",
            {"index.js": broken, "test.js": weak},
        ),
    ]
    return changes
