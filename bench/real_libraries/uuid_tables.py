"""google/uuid at 2d3c2a9 (go test ./...): a test and its table put between two tests, an Example,
a row in a table outside any test, a row in a test's own table (refused by design:
allow_test_edits), a refactor, go.mod's go line; a broken Validate with its test deleted.
"""

# ruff: noqa: E501 - the changes are other languages' code, quoted as it is

from __future__ import annotations

import re  # noqa: F401 - some changes use it


def changes(r):
    uuid_go, uuid_test, v4, gomod = r("uuid.go"), r("uuid_test.go"), r("version4.go"), r("go.mod")
    mid_at = 'var asString = "f47ac10b-58cc-0372-8567-0e02b2c3d479"\n'
    assert uuid_test.count(mid_at) == 1
    middle = uuid_test.replace(
        mid_at,
        """var urnTests = []string{
	"urn:uuid:f47ac10b-58cc-0372-8567-0e02b2c3d479",
	"URN:UUID:f47ac10b-58cc-0372-8567-0e02b2c3d479",
}

func TestParseURNAnyCase(t *testing.T) {
	for _, in := range urnTests {
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%q): %v", in, err)
		}
	}
}

"""
        + mid_at,
    )
    example = """package uuid_test

import (
	"fmt"

	"github.com/google/uuid"
)

func ExampleParse() {
	u, err := uuid.Parse("f47ac10b-58cc-0372-8567-0e02b2c3d479")
	fmt.Println(u, err, u.Version())
	// Output: f47ac10b-58cc-0372-8567-0e02b2c3d479 <nil> VERSION_0
}
"""
    row_at = '\t{"f47ac10b-58cc-0372-8567-0e02b2c3d479", 0, RFC4122, true},\n'
    assert uuid_test.count(row_at) == 1
    row = uuid_test.replace(
        row_at, row_at + '\t{"F47AC10B-58CC-4372-8567-0E02B2C3D479", 4, RFC4122, true},\n'
    )
    inline_at = '\t\t{"Valid UUID No Hyphens", "123e4567e89b12d3a456426655440000", nil},\n'
    inline = uuid_test.replace(
        inline_at,
        inline_at + '\t\t{"Valid UUID Upper Case", "123E4567-E89B-12D3-A456-426655440000", nil},\n',
    )
    refactor = v4.replace(
        "func NewString() string {\n\treturn Must(NewRandom()).String()\n}",
        "func NewString() string {\n\treturn New().String()\n}",
    )
    gomod2 = gomod + "\ngo 1.19\n"
    broken = uuid_go.replace(
        "\t\tfor i := 0; i < len(s); i += 2 {\n\t\t\t_, ok := xtob(s[i], s[i+1])\n\t\t\tif !ok {\n\t\t\t\treturn ErrInvalidUUIDFormat\n\t\t\t}\n\t\t}\n",
        "",
    )
    start = uuid_test.index("func TestValidate(t *testing.T) {")
    end = uuid_test.index(mid_at)
    removed = uuid_test[:start] + uuid_test[end:]
    assert broken != uuid_go and refactor != v4 and inline != uuid_test
    changes = [
        ("Parse's URN prefix case is not tested", "uuid.go:95", {"uuid_test.go": middle}),
        ("Parse has no example", "uuid.go:95", {"example_test.go": example}),
        ("upper-case input is not in the table", "uuid_test.go:26", {"uuid_test.go": row}),
        ("Validate's table has no upper-case case", "uuid_test.go:616", {"uuid_test.go": inline}),
        ("NewString repeats New", "version4.go:20", {"version4.go": refactor}),
        ("go.mod names no language version", "go.mod:1", {"go.mod": gomod2}),
        (
            "DISHONEST Validate skips hex check, TestValidate deleted",
            "uuid.go:243",
            {"uuid.go": broken, "uuid_test.go": removed},
        ),
    ]
    return changes
