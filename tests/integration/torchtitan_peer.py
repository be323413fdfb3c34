"""torchtitan 0.3.0's own text pipeline (HuggingFaceTextDataset with its HuggingFaceTokenizer), run
as a peer of titan's packing: `python torchtitan_peer.py TORCHTITAN_DIR TOKENIZER_DIR DATA.jsonl
SEQ_LEN` prints every row it yields for the file (one pass, infinite=False) as JSON lines
{"input", "labels", "positions"}.

torchtitan 0.3.0 is installed beside the venv (`pip install --target DIR torchtitan==0.3.0
--no-deps`), not in it, so it is imported from DIR with small shims for what its dataset module
imports but the packing never runs: tyro (its config CLI), torchdata's StatefulDataLoader (the
loader class around the dataset) and the loss module (which pulls in the distributed stack only
for IGNORE_INDEX)."""
import json
import sys
import types


class _Anything(types.ModuleType):
    """tyro, as far as torchtitan's config classes touch it at import time (annotations and
    decorators)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name)

    def __call__(self, *args, **kwargs):
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else self

    def __getitem__(self, key):
        return self


def _stub(name, **attributes):
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def rows(torchtitan_dir, tokenizer_dir, data, seq_len):
    sys.path.insert(0, torchtitan_dir)
    sys.modules["tyro"] = _Anything("tyro")
    _stub("torchtitan.components.dataloader",
          ParallelAwareDataloader=type("ParallelAwareDataloader", (),
                                       {"Config": type("Config", (), {})}))
    _stub("torchtitan.components.loss", IGNORE_INDEX=-100)
    from datasets import load_dataset
    from torchtitan.components.tokenizer import HuggingFaceTokenizer
    from torchtitan.hf_datasets import DatasetConfig
    from torchtitan.hf_datasets import text_datasets

    # A local jsonl as torchtitan's c4_test is read: a map-style datasets.Dataset of "text".
    text_datasets.DATASETS["local"] = DatasetConfig(
        path=data, loader=lambda path: load_dataset("json", data_files=path, split="train"),
        sample_processor=lambda sample: sample["text"])
    tokenizer = HuggingFaceTokenizer(tokenizer_path=tokenizer_dir)
    dataset = text_datasets.HuggingFaceTextDataset("local", None, tokenizer, seq_len=seq_len,
                                                   infinite=False)
    for inputs, labels in dataset:
        yield {"input": inputs["input"].tolist(), "labels": labels.tolist(),
               "positions": inputs["positions"].tolist()}


if __name__ == "__main__":
    torchtitan_dir, tokenizer_dir, data, seq_len = sys.argv[1:5]
    for row in rows(torchtitan_dir, tokenizer_dir, data, int(seq_len)):
        print(json.dumps(row))
