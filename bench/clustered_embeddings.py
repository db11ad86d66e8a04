# Writes N x 128 clustered embeddings (labels U{0..N/5-1}, centre + 1.5 N(0, I), seeded) as
# emb<N>.npy and a dataframe df<N>.csv whose rows are all validation, query and gallery: the input
# of bench/validate_knn_split.sh. Pure Python (numpy is not installed here).
#   python3 bench/clustered_embeddings.py N     (in the folder to write to; 200000: ~15 s idle)
import array, random, struct, sys
n, d = int(sys.argv[1]), 128
rng = random.Random(0)
labels = [rng.randrange(n // 5) for _ in range(n)]
centres = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(n // 5)]
values = array.array("f")
for label in labels:
    c = centres[label]
    values.extend(c[j] + 1.5 * rng.gauss(0, 1) for j in range(d))
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(f"emb{n}.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + values.tobytes())
with open(f"df{n}.csv", "w") as f:
    f.write("label,path,split,is_query,is_gallery\n")
    for i, label in enumerate(labels):
        f.write(f"{label},img{i}.jpg,validation,True,True\n")
