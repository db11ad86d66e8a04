"""A local stand-in for OML's mock dataset (oml.utils.download_mock_dataset), which OML's pipeline
tests download and neither these tests nor CI may.

    python oml_mock_dataset.py OUT

OUT gets images/ and the four dataframes OML's test configs name, with OML's file names and
columns: df.csv (label, path, split, is_query, is_gallery), df_with_bboxes.csv (+ x_1, x_2, y_1,
y_2), df_with_category.csv (+ category) and df_with_sequence.csv (+ sequence). The images are
drawn shapes, one shape a label: 4 train labels (0-3, what the configs' ArcFace num_classes: 4
asks for) and 4 validation labels (4-7), 4 images each, every validation image a query and a
gallery item. Two categories of 2 labels in each split (the category_balance samplers draw 2
labels of 1 category). In df_with_sequence.csv the first two images of a label share a sequence,
so every query keeps a ground truth once its sequence is ignored. Deterministic: the same OUT
every run. Used by tests/integration/oml_configs_tests.cpp.
"""

import csv
import os
import random
import sys

from PIL import Image, ImageDraw

# (label, split, shape, category): two round and two angular shapes in each split.
LABELS = [
    (0, "train", "disc", "round"),
    (1, "train", "ring", "round"),
    (2, "train", "square", "angular"),
    (3, "train", "triangle", "angular"),
    (4, "validation", "ellipse", "round"),
    (5, "validation", "half_disc", "round"),
    (6, "validation", "diamond", "angular"),
    (7, "validation", "cross", "angular"),
]
IMAGES_PER_LABEL = 4
WIDTH, HEIGHT = 96, 80


def draw(shape, box, colour, canvas):
    x1, y1, x2, y2 = box
    cx, cy = (x1 + x2) // 2, (y1 + y2) // 2
    if shape == "disc":
        canvas.ellipse(box, fill=colour)
    elif shape == "ring":
        canvas.ellipse(box, outline=colour, width=5)
    elif shape == "square":
        canvas.rectangle(box, fill=colour)
    elif shape == "triangle":
        canvas.polygon([(cx, y1), (x2, y2), (x1, y2)], fill=colour)
    elif shape == "ellipse":
        canvas.ellipse((x1, cy - (y2 - y1) // 4, x2, cy + (y2 - y1) // 4), fill=colour)
    elif shape == "half_disc":
        canvas.pieslice(box, 180, 360, fill=colour)
    elif shape == "diamond":
        canvas.polygon([(cx, y1), (x2, cy), (cx, y2), (x1, cy)], fill=colour)
    elif shape == "cross":
        canvas.rectangle((cx - 4, y1, cx + 4, y2), fill=colour)
        canvas.rectangle((x1, cy - 4, x2, cy + 4), fill=colour)


def main(out):
    rng = random.Random(0)
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    rows = []
    for label, split, shape, category in LABELS:
        for k in range(IMAGES_PER_LABEL):
            size = rng.randint(30, 50)
            x1, y1 = rng.randint(2, WIDTH - size - 2), rng.randint(2, HEIGHT - size - 2)
            box = (x1, y1, x1 + size, y1 + size)
            background = tuple(rng.randint(180, 255) for _ in range(3))
            colour = tuple(rng.randint(0, 120) for _ in range(3))
            image = Image.new("RGB", (WIDTH, HEIGHT), background)
            draw(shape, box, colour, ImageDraw.Draw(image))
            path = f"images/{shape}_{k}.jpg"
            image.save(os.path.join(out, path), quality=95)
            flag = "True" if split == "validation" else ""
            sequence = f"{shape}_0" if k < 2 else f"{shape}_{k}"
            rows.append({"label": label, "path": path, "split": split, "is_query": flag, "is_gallery": flag,
                         "x_1": box[0], "x_2": box[2], "y_1": box[1], "y_2": box[3],
                         "category": category, "sequence": sequence})
    base = ["label", "path", "split", "is_query", "is_gallery"]
    for name, extra in [("df.csv", []), ("df_with_bboxes.csv", ["x_1", "x_2", "y_1", "y_2"]),
                        ("df_with_category.csv", ["category"]), ("df_with_sequence.csv", ["sequence"])]:
        with open(os.path.join(out, name), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=base + extra, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1])
