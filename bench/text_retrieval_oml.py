"""OML's Python on the text retrieval benchmark: the peer of oml-train in bench/text_retrieval.sh.

    python bench/text_retrieval_oml.py DATA_DIR MODEL_DIR [steps] [threads]

What a user of OML 4.0 writes for texts (its README's train_val_all_modalities example), with
configs/debian_texts/train_extractor.yaml's settings: HFWrapper over transformers'
AutoModel.from_pretrained(MODEL_DIR) (the [CLS] token's hidden state), TextLabeledDataset /
TextQueryGalleryLabeledDataset with the folder's tokenizer (OML pads every text to max_length
128), BalanceSampler(n_labels=32, n_instances=2), TripletLossWithMiner(0.1, HardTripletsMiner),
Adam(lr=2e-5), `steps` optimizer steps, then OML's inference and calc_retrieval_metrics_rr on
the validation split. Prints the mean step time (after the first step) and the metrics.
"""
import sys
import time

import pandas as pd
import torch
from oml import datasets as d
from oml.inference import inference
from oml.losses import TripletLossWithMiner
from oml.metrics import calc_retrieval_metrics_rr
from oml.miners import HardTripletsMiner
from oml.models import HFWrapper
from oml.retrieval import RetrievalResults
from oml.samplers import BalanceSampler
from torch.utils.data import DataLoader
from transformers import AutoModel, AutoTokenizer


def main():
    data_dir, model_dir = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    df = pd.read_csv(f"{data_dir}/df.csv", keep_default_na=False)
    df_train = df[df["split"] == "train"].reset_index(drop=True)
    df_val = df[df["split"] == "validation"].reset_index(drop=True)
    df_val["is_query"] = df_val["is_query"].astype(str) == "True"
    df_val["is_gallery"] = df_val["is_gallery"].astype(str) == "True"

    hf = AutoModel.from_pretrained(model_dir, add_pooling_layer=False)
    model = HFWrapper(hf, hf.config.hidden_size).train()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    train = d.TextLabeledDataset(df_train, tokenizer=tokenizer, max_length=128)
    val = d.TextQueryGalleryLabeledDataset(df_val, tokenizer=tokenizer, max_length=128)

    optimizer = torch.optim.Adam(model.parameters(), lr=2e-5)
    criterion = TripletLossWithMiner(0.1, HardTripletsMiner(), need_logs=True)
    sampler = BalanceSampler(train.get_labels(), n_labels=32, n_instances=2)
    loader = DataLoader(train, batch_sampler=sampler, num_workers=1)

    # A step's time is from the end of the previous step to its own end: the batch's loading (the
    # worker's, as far as it is not hidden), forward, loss, backward and Adam — what oml-train's
    # samples/s counts.
    ends = []
    computes = []
    done = 0
    while done < steps:
        for batch in loader:
            start = time.perf_counter()
            embeddings = model(batch["input_tensors"])
            loss = criterion(embeddings, batch["labels"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            ends.append(time.perf_counter())
            computes.append(ends[-1] - start)
            done += 1
            if done == steps:
                break
    step_ms = 1000 * (ends[-1] - ends[0]) / max(1, len(ends) - 1)
    compute_ms = 1000 * sum(computes[1:]) / max(1, len(computes) - 1)
    print(f"oml-python: {done} steps, {step_ms:.0f} ms per step (after the first), "
          f"{compute_ms:.0f} ms of it forward, loss, backward and Adam")

    model.eval()
    start = time.perf_counter()
    embeddings = inference(model, val, batch_size=128, num_workers=1)
    rr = RetrievalResults.from_embeddings(embeddings, val, n_items=5)
    metrics = calc_retrieval_metrics_rr(rr, cmc_top_k=(1, 5), map_top_k=(5,), precision_top_k=())
    seconds = time.perf_counter() - start
    cmc1 = float(metrics["cmc"][1])
    cmc5 = float(metrics["cmc"][5])
    map5 = float(metrics["map"][5])
    print(f"oml-python: validation of {len(val)} texts in {seconds:.1f} s: cmc@1 {cmc1:.4f} cmc@5 {cmc5:.4f} map@5 {map5:.4f}")


if __name__ == "__main__":
    main()
