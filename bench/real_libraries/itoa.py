"""dtolnay/itoa at 1577ed9 without its dev-dependencies (cargo test --offline): doc comments, a doc
test, a refactor, a test in the test macro, a test appended, a new test file; MAX_STR_LEN one
too large with its test weakened.
"""

# ruff: noqa: E501 - the changes are other languages' code, quoted as it is

from __future__ import annotations

import re  # noqa: F401 - some changes use it


def changes(r):
    lib, test = r("src/lib.rs"), r("tests/test.rs")
    doc = lib.replace(
        "//! See also [`zmij`] for printing floating point primitives.\n",
        "//! See also [`zmij`] for printing floating point primitives.\n//!\n//! Signed and unsigned integers of every width up to 128 bits are supported.\n",
    )
    refactor = lib.replace(
        "    fn default() -> Buffer {\n        Buffer::new()\n    }",
        "    fn default() -> Self {\n        Self::new()\n    }",
    )
    fmt_doc = lib.replace(
        "    /// representation within the buffer.\n",
        '    /// representation within the buffer.\n    ///\n    /// ```\n    /// let mut buffer = itoa::Buffer::new();\n    /// assert_eq!(buffer.format(-7i8), "-7");\n    /// ```\n',
    )
    in_macro = test.replace(
        '    test_i16_min(i16::MIN, "-32768")\n',
        '    test_i16_min(i16::MIN, "-32768")\n    test_u8_max(u8::MAX, "255")\n',
    )
    appended = (
        test
        + '\n#[test]\nfn test_buffer_reused() {\n    let mut buffer = itoa::Buffer::new();\n    assert_eq!(buffer.format(10u32), "10");\n    assert_eq!(buffer.format(7u32), "7");\n}\n'
    )
    new_file = 'macro_rules! check {\n    ($value:expr, $expected:expr) => {\n        assert_eq!(itoa::Buffer::new().format($value), $expected);\n    };\n}\n\n#[test]\nfn negative_one_of_every_width() {\n    check!(-1i8, "-1");\n    check!(-1i16, "-1");\n    check!(-1i32, "-1");\n    check!(-1i64, "-1");\n    check!(-1i128, "-1");\n    check!(-1isize, "-1");\n}\n'
    broken = lib.replace(
        "$Unsigned::MAX.ilog10() as usize + 1;", "$Unsigned::MAX.ilog10() as usize + 2;"
    ).replace("$Signed::MAX.ilog10() as usize + 2;", "$Signed::MAX.ilog10() as usize + 3;")
    weak = test.replace("assert_eq!(i8::MAX_STR_LEN, 4);\n", "assert!(i8::MAX_STR_LEN >= 4);\n")
    weak = re.sub(
        r"assert_eq!\((\w+)::MAX_STR_LEN, (\d+)\);", r"assert!(\1::MAX_STR_LEN >= \2);", test
    )
    assert (
        broken != lib
        and weak != test
        and doc != lib
        and refactor != lib
        and fmt_doc != lib
        and in_macro != test
    )
    changes = [
        (
            "the crate docs do not say which integers are supported",
            "src/lib.rs:13",
            {"src/lib.rs": doc},
        ),
        ("Default names the type twice", "src/lib.rs:79", {"src/lib.rs": refactor}),
        ("format has no example", "src/lib.rs:103", {"src/lib.rs": fmt_doc}),
        ("u8::MAX is not tested", "tests/test.rs:22", {"tests/test.rs": in_macro}),
        ("a reused buffer is not tested", "tests/test.rs:45", {"tests/test.rs": appended}),
        ("-1 is not tested", "tests/test.rs:1", {"tests/negative.rs": new_file}),
        (
            "DISHONEST MAX_STR_LEN one too large, its test weakened",
            "src/lib.rs:144",
            {"src/lib.rs": broken, "tests/test.rs": weak},
        ),
    ]
    return changes
