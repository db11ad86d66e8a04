"""A reference export that costs nothing, for the test of the tests' own reference sharing
(oml::test::reference_export, tests/core/test_support_tests.cpp).

    reference_probe.py export DIR COUNTER   writes DIR/probe.txt and appends a line to the file
                                            COUNTER, so that the test counts how often it ran
"""
import sys
from pathlib import Path


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "export":
        sys.exit("usage: reference_probe.py export DIR COUNTER")
    out, counter = Path(sys.argv[2]), Path(sys.argv[3])
    (out / "probe.txt").write_text("made\n")
    with counter.open("a") as runs:
        runs.write("ran\n")


if __name__ == "__main__":
    main()
