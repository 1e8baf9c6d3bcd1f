"""What signing costs a hit: a 1 KB value decoded (and encoded) signed against unsigned.

    python -m tests.benchmarks.bench_signing [--rounds 5] [--calls 20000] [--markdown]

The Django and Flask adapters sign pickled values by default (a key derived from
``SECRET_KEY``). Signing adds one HMAC-SHA256 over the key and the value to each write,
and its check to each read. A signing and a plain codec decode (and encode) the same
value, 930 bytes pickled, in interleaved rounds, unpinned; the figure is the difference of
the medians in µs, which the target bounds at 2 µs per hit. No server is involved: the
cost is the codec's alone.
"""

from __future__ import annotations

import statistics

from mcache import Codec
from tests.benchmarks.common import Figure, arguments, interleaved, report, table

KEY = "site:catalog:price-list:7f3a9c"
VALUE = {"title": "Price list", "rows": [(f"item {i:03d}", i * 1.5) for i in range(40)]}
TARGET_US = 2.0


def rows(rounds: int, calls: int) -> tuple[list[list[str]], list[Figure]]:
    """Return the table's rows and the figures: a hit's decode, and a write and a hit."""
    unsigned, signed = Codec(), Codec(signing_key=b"a key derived from SECRET_KEY")
    stored_plain, stored_signed = unsigned.dumps(VALUE, KEY), signed.dumps(VALUE, KEY)
    assert signed.loads(stored_signed, KEY) == VALUE == unsigned.loads(stored_plain, KEY)
    size = len(stored_plain)
    cases = {
        f"a hit: decode {size} bytes": (
            lambda: signed.loads(stored_signed, KEY),
            lambda: unsigned.loads(stored_plain, KEY),
        ),
        "a write: encode (no target)": (
            lambda: signed.dumps(VALUE, KEY),
            lambda: unsigned.dumps(VALUE, KEY),
        ),
    }
    table_rows, figures = [], []
    for name, (mine, anchor) in cases.items():
        signed_us, unsigned_us = (
            statistics.median(samples) for samples in interleaved([mine, anchor], rounds, calls)
        )
        added = signed_us - unsigned_us
        met = added <= TARGET_US if name.startswith("a hit") else None
        table_rows.append(
            [name, f"{signed_us:.2f}", f"{unsigned_us:.2f}", f"{added:+.2f}", str(met or "")]
        )
        figures.append(
            Figure(
                f"signing, {name} (µs added)",
                f"{signed_us:.2f} µs",
                f"{unsigned_us:.2f} µs unsigned",
                f"{added:+.2f} µs",
                f"≤ +{TARGET_US:.0f} µs" if met is not None else "",
                met,
            )
        )
    return table_rows, figures


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    table_rows, figures = rows(args.rounds, args.calls)
    header = ["1 KB value", "signed µs (p50)", "unsigned µs (p50)", "added µs", "≤ 2 µs"]
    print(table(header, table_rows, args.markdown))
    report(figures, args.figures)


if __name__ == "__main__":
    main()
