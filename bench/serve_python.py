"""The Python peer of oml-serve for bench/serve_throughput.sh: what a PyTorch + Faiss user writes to
serve a gallery — the same model (bench/default_job_python.py's ConvNet, oml-cpp's conv_net with the
same parameter names) loaded from an oml-cpp checkpoint with torch.load, the gallery's embeddings
from an oml-cpp index folder in a Faiss index, behind the standard library's threading HTTP server.

    /opt/oml-cpp/venv/bin/python bench/serve_python.py --index DIR --weights CKPT --port P
        [--backend exact|faiss_ivf --nlist N --nprobe P] [--threads 2]

POST /search with JSON {"embedding": [...], "k": 10} or an image body (Content-Type image/png):
the same answer shape as oml-serve's ({"neighbours": [{"id", "path", "label", "distance"}]}).
One forward pass and one Faiss search per request (no batching): the straightforward server, with
the two settings an expert adds (TCP_NODELAY, a listen backlog of 128).
exact = IndexFlatL2 (float32 distances; oml-serve's exact re-ranks in double precision).
"""

import argparse
import csv
import io
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import faiss
import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_argv, sys.argv = sys.argv, sys.argv[:1]  # default_job_python reads its own arguments on import
from default_job_python import ConvNet, normalise  # noqa: E402

sys.argv = _argv


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--index", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--backend", default="exact")
    p.add_argument("--nlist", type=int, default=0)
    p.add_argument("--nprobe", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)

    version = open(os.path.join(args.index, "CURRENT")).read().strip()
    folder = os.path.join(args.index, version)
    gallery = np.load(os.path.join(folder, "embeddings.npy")).astype(np.float32)
    with open(os.path.join(folder, "items.csv")) as f:
        items = list(csv.DictReader(f))
    d = gallery.shape[1]
    if args.backend == "exact":
        index = faiss.IndexFlatL2(d)
    else:
        index = faiss.IndexIVFFlat(faiss.IndexFlatL2(d), d, args.nlist)
        index.train(gallery)
        index.nprobe = args.nprobe
    index.add(gallery)

    model = ConvNet()
    state = torch.load(args.weights, map_location="cpu", weights_only=True)
    model.load_state_dict(state.get("state_dict", state))
    model.eval()

    def answer(embedding, k):
        distances, ids = index.search(embedding.reshape(1, -1).astype(np.float32), k)
        out = []
        for dist, i in zip(distances[0], ids[0]):
            if i < 0:
                continue
            item = items[i]
            out.append({"id": int(item["id"]), "path": item["path"],
                        "label": int(item["label"]) if item["label"] else None,
                        "distance": float(np.sqrt(max(dist, 0.0)))})
        return {"neighbours": out}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every keep-alive answer.
        disable_nagle_algorithm = True

        def log_message(self, *a):  # quiet, as oml-serve
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            k = 10
            if self.headers.get("Content-Type", "").startswith("image/"):
                image = np.asarray(Image.open(io.BytesIO(body)).convert("L"))
                with torch.no_grad():
                    embedding = model(normalise(torch.from_numpy(image.copy()).unsqueeze(0)))[0].numpy()
                if "k=" in self.path:
                    k = int(self.path.split("k=")[1].split("&")[0])
            else:
                request = json.loads(body)
                embedding = np.asarray(request["embedding"], dtype=np.float32)
                k = int(request.get("k", k))
            reply = json.dumps(answer(embedding, k)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            if self.headers.get("Connection", "").lower() == "keep-alive":  # ab -k speaks HTTP/1.0 keep-alive
                self.send_header("Connection", "keep-alive")
            self.end_headers()
            self.wfile.write(reply)

    ThreadingHTTPServer.request_queue_size = 128  # the default 5 makes 32 clients retry connecting after 1 s
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"serving {len(items)} items on {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
