#!/usr/bin/env python3
"""check_images.py — validates images written by `hiernet plot` (standard
library only), for tests/cli/test_plot.sh.

  check_images.py png FILE...        each is a PNG (signature, IHDR, IEND) over 3 KB
  check_images.py keys FILE.svg      prints the legend entries of a gnuplot SVG, one a line

A gnuplot SVG puts every plotted element in <g id="gnuplot_plot_N"> whose
<title> is the element's key text, or "gnuplot_plot_N" when it has none.
Exits 1 with a message naming the file at fault."""
import struct
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def check_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        sys.exit(f"{path}: no PNG signature")
    if data[12:16] != b"IHDR":
        sys.exit(f"{path}: no IHDR chunk")
    width, height = struct.unpack(">II", data[16:24])
    if width < 100 or height < 100:
        sys.exit(f"{path}: {width}x{height} is too small")
    if data[-8:-4] != b"IEND":  # the last chunk: length 0, "IEND", CRC
        sys.exit(f"{path}: no IEND chunk (truncated)")
    if len(data) < 3000:
        sys.exit(f"{path}: only {len(data)} bytes")


def svg_keys(path):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        sys.exit(f"{path}: not XML: {e}")
    if root.tag != SVG + "svg":
        sys.exit(f"{path}: root element is {root.tag}, not svg")
    keys = []
    for g in root.iter(SVG + "g"):
        gid = g.get("id", "")
        if gid.startswith("gnuplot_plot_"):
            title = g.find(SVG + "title")
            if title is not None and title.text and title.text != gid:
                keys.append(title.text)
    return keys


def main():
    mode, files = sys.argv[1], sys.argv[2:]
    if mode == "png":
        for path in files:
            check_png(path)
    elif mode == "keys":
        for key in svg_keys(files[0]):
            print(key)
    else:
        sys.exit(f"unknown mode {mode}")


main()
