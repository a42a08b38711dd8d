"""The receipt reader of the examples (examples/receipt.py) reads what the drawer drew, at
any scale and whatever row filters the PNG uses; the committed receipt image is the one
the drawer makes; the support agent answers about the order it reads off the image."""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import pytest
from evalport.client import LocalTarget
from evalport.protocol import ImagePart

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
from receipt import RECEIPT_LINES, decode_png, draw_receipt, read_lines  # noqa: E402
from support_agent import agent  # noqa: E402


def _paeth(left: int, up: int, corner: int) -> int:
    guess = left + up - corner
    return min(
        (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)
    )[2]


def _rgb_png_with_filters(rows: list[list[int]]) -> bytes:
    """The same picture as an RGB PNG whose rows cycle through the five filters."""
    width = len(rows[0])
    previous = bytes(width * 3)
    raw = b""
    for y, row in enumerate(rows):
        line = bytes(value for level in row for value in (level, level, level))
        kind = y % 5
        out = bytearray()
        for i, value in enumerate(line):
            left = line[i - 3] if i >= 3 else 0
            up, corner = previous[i], previous[i - 3] if i >= 3 else 0
            predicted = (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]
            out.append((value - predicted) & 255)
        raw += bytes([kind]) + bytes(out)
        previous = line

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("scale", [1, 2, 3, 5])
def test_reads_what_it_drew(scale: int) -> None:
    lines = ["ORDER A1049", "TOTAL 1234567890.5", "ACME SHOP THANK YOU"]
    assert read_lines(draw_receipt(lines, scale=scale)) == lines


def test_every_row_filter_decodes_to_the_same_pixels() -> None:
    drawn = draw_receipt(RECEIPT_LINES, scale=2)
    rows = decode_png(drawn)
    assert decode_png(_rgb_png_with_filters(rows)) == rows
    assert read_lines(_rgb_png_with_filters(rows)) == RECEIPT_LINES


def test_the_committed_receipt_is_the_drawn_one() -> None:
    assert (EXAMPLES / "evals" / "receipt.png").read_bytes() == draw_receipt(RECEIPT_LINES)


def test_damaged_images_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a PNG"):
        decode_png(b"GIF89a")
    with pytest.raises(ValueError, match="damaged"):
        decode_png(draw_receipt(["A1"])[:60])


def _png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + b"\0\0\0\0"

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat)


def test_an_image_larger_than_a_receipt_is_refused_before_it_is_inflated() -> None:
    # 48 KB that inflate to 100 MB of a 10,000 x 10,000 image: this held a server's loop
    bomb = _png(10_000, 10_000, zlib.compress(bytes(10_001 * 10_000), 9))
    assert len(bomb) < 200_000
    with pytest.raises(ValueError, match="larger than a receipt"):
        read_lines(bomb)


def test_a_stream_that_inflates_past_its_image_is_read_no_further() -> None:
    # a 100 x 100 image whose data goes on for 50 MB: only the image's rows are inflated
    bomb = _png(100, 100, zlib.compress(bytes(101 * 100) + bytes(50_000_000), 9))
    assert decode_png(bomb) == [[0] * 100] * 100


async def test_the_support_agent_reads_the_order_off_the_receipt() -> None:
    image = ImagePart(
        data=(EXAMPLES / "evals" / "receipt.png").read_bytes(), media_type="image/png"
    )
    async with LocalTarget(agent) as target:
        session = await target.open()
        turn = await session.send("Where is the order on this receipt?", parts=[image])
        assert turn.reply == "Order A1049 is shipped with DHL."
        assert [record.tool_call.name for record in turn.run.tools] == ["order_status"]
        other = ImagePart(data=draw_receipt(["ORDER A1050"]), media_type="image/png")
        turn = await session.send("And this one?  Where is it?", parts=[other])
        assert turn.reply == "Order A1050 is delivered with UPS."
