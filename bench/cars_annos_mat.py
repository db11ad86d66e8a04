# Writes a CARS196-shaped tree for oml-convert cars: cars_annos.mat laid out as MATLAB saves the
# dataset's (a 1 x N struct array `annotations` with relative_im_path as UTF-16 chars, bbox_x1..
# bbox_y2, class and test as 1x1 doubles stored in the smallest integer type that holds them,
# each variable zlib-compressed as in MATLAB's default -v7 files), the same rows as
# cars_annos.csv, and car_ims/ with one small PNG per row. Pure Python (struct, zlib): the input
# of the MAT reader's figure in docs/benchmarks.md.
#   python3 bench/cars_annos_mat.py DIR [ROWS] [--uncompressed]     (ROWS: 16185, CARS196's count)
import os, struct, sys, zlib

args = [a for a in sys.argv[1:] if not a.startswith("--")]
root, rows = args[0], int(args[1]) if len(args) > 1 else 16185
compressed = "--uncompressed" not in sys.argv
miINT8, miUINT8, miINT32, miUINT16, miUINT32, miDOUBLE, miMATRIX, miCOMPRESSED = 1, 2, 5, 4, 6, 9, 14, 15


def element(kind, data):
    out = struct.pack("<II", kind, len(data)) + data
    return out + b"\0" * (-len(out) % 8)


def matrix(cls, dims, name, body):
    flags = element(miUINT32, struct.pack("<II", cls, 0))
    return element(miMATRIX, flags + element(miINT32, struct.pack("<%di" % len(dims), *dims)) +
                   element(miINT8, name.encode()) + body)


def number(value):
    if value == int(value) and 0 <= value < 256:
        data = element(miUINT8, bytes([int(value)]))
    elif value == int(value) and 0 <= value < 65536:
        data = element(miUINT16, struct.pack("<H", int(value)))
    else:
        data = element(miDOUBLE, struct.pack("<d", value))
    return matrix(6, [1, 1], "", data)  # mxDOUBLE


def text(value):
    return matrix(4, [1, len(value)], "", element(miUINT16, value.encode("utf-16-le")))  # mxCHAR


def annotation(i):
    label = i * 196 // rows + 1  # sorted by class, as CARS196's file is
    x1, y1 = (i * 7) % 40, (i * 11) % 30
    return (f"car_ims/{i + 1:06d}.jpg", x1, y1, x1 + 10 + i % 300, y1 + 8 + i % 200, label, i % 2)


fields = ["relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"]
names = b"".join(f.encode().ljust(32, b"\0") for f in fields)
body = struct.pack("<HHi", miINT32, 4, 32) + element(miINT8, names)  # field name length: small element
annotations = [annotation(i) for i in range(rows)]
for path, *values in annotations:
    body += text(path) + b"".join(number(v) for v in values)
variable = matrix(2, [1, rows], "annotations", body)  # mxSTRUCT
if compressed:
    packed = zlib.compress(variable)
    variable = struct.pack("<II", miCOMPRESSED, len(packed)) + packed
header = b"MATLAB 5.0 MAT-file, Platform: GLNXA64, written by bench/cars_annos_mat.py".ljust(116, b" ")
os.makedirs(os.path.join(root, "car_ims"), exist_ok=True)
with open(os.path.join(root, "cars_annos.mat"), "wb") as f:
    f.write(header + b"\0" * 8 + struct.pack("<H", 0x0100) + b"IM" + variable)
with open(os.path.join(root, "cars_annos.csv"), "w") as f:
    f.write(",".join(fields) + "\n")
    f.writelines(",".join(str(v) for v in a) + "\n" for a in annotations)


def png(width, height):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    pixels = b"".join(b"\0" + bytes([90, 90, 90]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b""))


image = png(64, 48)
for path, *_ in annotations:
    with open(os.path.join(root, path), "wb") as f:
        f.write(image)
