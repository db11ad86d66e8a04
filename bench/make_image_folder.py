"""Writes a small CUB-like dataset in OML's format, for running OML's shipped CUB training config
(bench/oml_configs/cub.yaml) without CUB itself: colour images of drawn shapes, one "species" per
label (its shape, colours and size range), with a bounding box around the shape, as CUB's
df_with_bboxes.csv has:

    /opt/oml-cpp/venv/bin/python bench/make_image_folder.py --out DIR [--labels 40]
        [--per-label 16] [--size 96] [--seed 0]

DIR/images/<label>/<i>.jpg and DIR/df_with_bboxes.csv (label, path, split, is_query, is_gallery,
x_1, x_2, y_1, y_2): the first half of the labels train, the second half validate (every image
a query and a gallery item), as CUB's 100 + 100 classes. Deterministic for a seed.
"""

import argparse
import csv
import os
import random

from PIL import Image, ImageDraw, ImageFilter


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--labels", type=int, default=40)
    p.add_argument("--per-label", type=int, default=16)
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


SHAPES = ("ellipse", "rectangle", "triangle", "diamond")


def draw_item(rng, species, size):
    shape, body, wing, scale = species
    background = tuple(rng.randrange(60, 200) for _ in range(3))
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)
    w = int(size * rng.uniform(scale, scale + 0.25))
    h = int(size * rng.uniform(scale, scale + 0.25))
    x0, y0 = rng.randrange(0, size - w), rng.randrange(0, size - h)
    box = (x0, y0, x0 + w, y0 + h)
    jitter = lambda c: tuple(min(255, max(0, v + rng.randrange(-25, 26))) for v in c)  # noqa: E731
    if shape == "ellipse":
        draw.ellipse(box, fill=jitter(body))
    elif shape == "rectangle":
        draw.rectangle(box, fill=jitter(body))
    elif shape == "triangle":
        draw.polygon([(x0, y0 + h), (x0 + w // 2, y0), (x0 + w, y0 + h)], fill=jitter(body))
    else:
        draw.polygon([(x0 + w // 2, y0), (x0 + w, y0 + h // 2), (x0 + w // 2, y0 + h), (x0, y0 + h // 2)],
                     fill=jitter(body))
    draw.ellipse((x0 + w // 4, y0 + h // 3, x0 + w // 2, y0 + 2 * h // 3), fill=jitter(wing))
    return image.filter(ImageFilter.GaussianBlur(rng.uniform(0.0, 1.0))), box


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    rows = []
    for label in range(args.labels):
        species = (SHAPES[label % len(SHAPES)], tuple(rng.randrange(256) for _ in range(3)),
                   tuple(rng.randrange(256) for _ in range(3)), rng.uniform(0.3, 0.6))
        split = "train" if label < args.labels // 2 else "validation"
        folder = os.path.join(args.out, "images", str(label))
        os.makedirs(folder, exist_ok=True)
        for i in range(args.per_label):
            image, (x1, y1, x2, y2) = draw_item(rng, species, args.size)
            path = os.path.join("images", str(label), f"{i}.jpg")
            image.save(os.path.join(args.out, path), quality=92)
            # OML's format: is_query / is_gallery empty on train rows, True on validation rows.
            flag = "True" if split == "validation" else ""
            rows.append([label, path, split, flag, flag, x1, x2, y1, y2])
    with open(os.path.join(args.out, "df_with_bboxes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["label", "path", "split", "is_query", "is_gallery", "x_1", "x_2", "y_1", "y_2"])
        writer.writerows(rows)


if __name__ == "__main__":
    main()
