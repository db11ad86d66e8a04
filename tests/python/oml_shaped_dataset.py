"""Fashion-MNIST regrouped to the shape of OML's pipeline configs (their samplers ask for up to
150 labels per batch, and 3 to 5 categories of 30+ labels each).

    python oml_shaped_dataset.py SUBSET OUT [TRAIN_LABELS_PER_CLASS [VALIDATION_LABELS_PER_CLASS]]

SUBSET is an oml-convert'ed Fashion-MNIST folder (df.csv + images/, at least 240 train and 20
test images of every class: `oml-convert fashion-mnist --limit 3000`). OUT gets images/ (a link
to SUBSET's) and the same dataframe under every name OML's configs read (df.csv,
df_with_bboxes.csv, df_no_bboxes.csv): each train label is 6 train images of one class, 40
labels per class (or TRAIN_LABELS_PER_CLASS); each validation label is 4 test images of one
class (query and gallery), 5 per class (or VALIDATION_LABELS_PER_CLASS); the category of a label is its class's name. Used by
tests/integration/oml_configs_tests.cpp and by the GPU check (scripts/gpu_bundle.sh).
"""

import csv
import os
import sys
from collections import defaultdict

CLASSES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]
TRAIN_LABELS_PER_CLASS, TRAIN_IMAGES_PER_LABEL = 40, 6
VALIDATION_LABELS_PER_CLASS, VALIDATION_IMAGES_PER_LABEL = 5, 4


def main(subset, out, train_labels_per_class=TRAIN_LABELS_PER_CLASS,
         validation_labels_per_class=VALIDATION_LABELS_PER_CLASS):
    by_split = {"train": defaultdict(list), "validation": defaultdict(list)}
    with open(os.path.join(subset, "df.csv")) as f:
        for row in csv.DictReader(f):
            by_split[row["split"]][int(row["label"])].append(row["path"])
    rows = []
    label = 0
    for split, labels, images, flags in [
        ("train", train_labels_per_class, TRAIN_IMAGES_PER_LABEL, ("", "")),
        ("validation", validation_labels_per_class, VALIDATION_IMAGES_PER_LABEL, ("True", "True")),
    ]:
        for c, name in enumerate(CLASSES):
            paths = by_split[split][c]
            if len(paths) < labels * images:
                sys.exit(f"{subset}: {len(paths)} {split} images of class {c}, need {labels * images}")
            for k in range(labels):
                for path in paths[k * images : (k + 1) * images]:
                    rows.append([label, path, split, *flags, name])
                label += 1
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(os.path.join(out, "images")):
        os.symlink(os.path.abspath(os.path.join(subset, "images")), os.path.join(out, "images"))
    for name in ["df.csv", "df_with_bboxes.csv", "df_no_bboxes.csv"]:
        with open(os.path.join(out, name), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["label", "path", "split", "is_query", "is_gallery", "category"])
            writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(n) for n in sys.argv[3:5]))
