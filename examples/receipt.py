"""Receipts as PNG images, drawn and read in pure Python (zlib only, no imaging library).

The example support agent reads the order number off a photo-less, honest receipt: a
PNG this module draws in a tiny 5x7 bitmap font (:func:`draw_receipt`), and reads back by
decoding the PNG and matching each glyph against the font's templates (:func:`read_lines`).
Nothing is hidden in the file: the agent sees only pixels.

Reading, step by step: decode the PNG (8-bit grayscale, RGB or RGBA, all five row
filters; at most :data:`MAX_PIXELS`, so a small file that claims a huge image is refused
before it is inflated), call a pixel ink when it is darker than mid-grey, split the image into text
lines where no row holds ink, split each line into glyphs where no column does (a gap
wider than two font pixels is a space), and name each glyph by the template of its width
with the fewest differing cells after scaling it down to the font's grid.

Run it to draw the receipt of the examples' eval (``examples/evals/receipt.png``)::

    python examples/receipt.py
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

FONT: dict[str, tuple[str, ...]] = {
    "A": (".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"),
    "C": (".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."),
    "D": ("####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."),
    "E": ("#####", "#....", "#....", "####.", "#....", "#....", "#####"),
    "H": ("#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"),
    "I": ("###", ".#.", ".#.", ".#.", ".#.", ".#.", "###"),
    "K": ("#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"),
    "L": ("#....", "#....", "#....", "#....", "#....", "#....", "#####"),
    "M": ("#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"),
    "N": ("#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#", "#...#"),
    "O": (".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."),
    "P": ("####.", "#...#", "#...#", "####.", "#....", "#....", "#...."),
    "R": ("####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"),
    "S": (".####", "#....", "#....", ".###.", "....#", "....#", "####."),
    "T": ("#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."),
    "U": ("#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."),
    "Y": ("#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."),
    "0": (".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."),
    "1": ("..#", ".##", "#.#", "..#", "..#", "..#", "..#"),
    "2": (".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"),
    "3": ("####.", "....#", "....#", ".###.", "....#", "....#", "####."),
    "4": ("...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."),
    "5": ("#####", "#....", "####.", "....#", "....#", "#...#", ".###."),
    "6": (".###.", "#....", "#....", "####.", "#...#", "#...#", ".###."),
    "7": ("#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."),
    "8": (".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."),
    "9": (".###.", "#...#", "#...#", ".####", "....#", "....#", ".###."),
    ".": (".", ".", ".", ".", ".", ".", "#"),
}
ROWS = 7
MAX_PIXELS = 250_000
"""The largest image read (a receipt is about 200 x 100): decoding is pure Python."""
INK, PAPER = 40, 236  # grey levels: dark ink on off-white paper


def draw_receipt(lines: list[str], scale: int = 3, margin: int = 4) -> bytes:
    """A grayscale PNG of ``lines`` in :data:`FONT`, each font pixel ``scale`` pixels."""
    widths = [sum(len(FONT[c][0]) + 1 if c != " " else 4 for c in line) for line in lines]
    width = (max(widths) + 2 * margin) * scale
    height = (len(lines) * (ROWS + 3) + 2 * margin) * scale
    pixels = [[PAPER] * width for _ in range(height)]
    for number, line in enumerate(lines):
        x = margin
        top = margin + number * (ROWS + 3)
        for char in line:
            if char == " ":
                x += 4
                continue
            glyph = FONT[char]
            for row, cells in enumerate(glyph):
                for column, cell in enumerate(cells):
                    if cell == "#":
                        for dy in range(scale):
                            start = (x + column) * scale
                            pixels[(top + row) * scale + dy][start : start + scale] = [INK] * scale
            x += len(glyph[0]) + 1
    return _png(pixels)


def _png(pixels: list[list[int]]) -> bytes:
    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)  # filter 0 on every row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"".join(
        (b"\x89PNG\r\n\x1a\n", chunk(b"IHDR", header), chunk(b"IDAT", zlib.compress(raw, 9)))
    ) + chunk(b"IEND", b"")


def decode_png(data: bytes) -> list[list[int]]:
    """The grey level of every pixel of an 8-bit grayscale, RGB or RGBA PNG; a
    :class:`ValueError` for anything else, or a damaged file."""
    try:
        return _decode(data)
    except (zlib.error, struct.error, IndexError) as error:
        raise ValueError(f"a damaged PNG image ({error})") from None


def _decode(data: bytes) -> list[list[int]]:
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("not a PNG image")
    position, idat, header = 8, [], b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
        position += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    channels = {0: 1, 2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError("only 8-bit grayscale, RGB and RGBA PNGs without interlace are read")
    if width * height > MAX_PIXELS:
        raise ValueError(f"a {width} x {height} image is larger than a receipt")
    stride = width * channels
    raw = zlib.decompressobj().decompress(b"".join(idat), height * (stride + 1))
    rows: list[list[int]] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - corner
                near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up))
                near = min(near, (abs(guess - corner), 2, corner))
                line[i] = (line[i] + near[2]) & 255
        previous = line
        rows.append(
            [
                sum(line[x * channels : x * channels + min(channels, 3)]) // min(channels, 3)
                for x in range(width)
            ]
        )
    return rows


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of ``True``."""
    runs, start = [], None
    for index, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index))
            start = None
    return runs


def _cells(
    ink: list[list[bool]], top: int, bottom: int, left: int, right: int, scale: float
) -> tuple[str, ...]:
    """The glyph in the box, sampled at the centre of each font pixel."""
    columns = max(1, round((right - left) / scale))
    return tuple(
        "".join(
            "#" if ink[top + int((row + 0.5) * scale)][left + int((column + 0.5) * scale)] else "."
            for column in range(columns)
        )
        for row in range(ROWS)
    )


def read_lines(png: bytes) -> list[str]:
    """The text lines of a receipt image drawn in :data:`FONT` (see the module rules)."""
    ink = [[level < 128 for level in row] for row in decode_png(png)]
    lines = []
    for top, bottom in _runs([any(row) for row in ink]):
        scale = (bottom - top) / ROWS
        band = ink[top:bottom]
        columns = _runs([any(row[x] for row in band) for x in range(len(ink[0]))])
        text, last = "", None
        for left, right in columns:
            if last is not None and left - last > 2 * scale:
                text += " "
            cells = _cells(ink, top, bottom, left, right, scale)
            text += min(FONT, key=lambda char: _distance(FONT[char], cells))
            last = right
        lines.append(text)
    return lines


def _distance(template: tuple[str, ...], cells: tuple[str, ...]) -> int:
    if len(template[0]) != len(cells[0]):
        return 10**6
    return sum(
        a != b
        for row, seen in zip(template, cells, strict=True)
        for a, b in zip(row, seen, strict=True)
    )


RECEIPT_LINES = ["ACME SHOP", "ORDER A1049", "TOTAL 42.50", "THANK YOU"]

if __name__ == "__main__":
    target = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "evals" / "receipt.png"
    )
    target.write_bytes(draw_receipt(RECEIPT_LINES))
    print(f"wrote {target}: {read_lines(target.read_bytes())}")
