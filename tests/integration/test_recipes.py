"""The three training paths' recipe functions (transformers_modeling_backend_full, its
_native_qwen3 and titan_kernels_qwen3) differ only in the model and the kernels, so that from one
base they train to the same losses, and each ends with a Hugging Face export."""
import math
import tomllib

import pytest

from conftest import read_metrics, run_titan
from hf_models import make_hf_model

RECIPES = [("transformers_modeling_backend", "transformers_modeling_backend_full"),
           ("transformers_modeling_backend", "transformers_modeling_backend_native_qwen3"),
           ("qwen3", "titan_kernels_qwen3")]
# What may differ: where the run writes and what it is called, the model, the kernels.
ALLOWED = {("job", "dump_folder"), ("job", "description"), ("model", "name"), ("model", "flavor"),
           ("model", "hf_model"), ("model", "hf_assets_path"), ("override", "imports"),
           ("override", "fallback")}


def resolved(module, config):
    return tomllib.loads(run_titan("configs", "--module", module, "--config", config,
                                   "--print").stdout)


def test_the_recipe_functions_differ_only_in_the_model_and_the_kernels():
    configs = [resolved(*recipe) for recipe in RECIPES]
    first = configs[0]
    for recipe, other in zip(RECIPES[1:], configs[1:]):
        differ = {(section, key) for section in first for key in first[section]
                  if first[section][key] != other[section][key]}
        assert differ <= ALLOWED, (recipe, sorted(differ - ALLOWED))
    for config in configs:
        assert config["checkpoint"]["last_save_in_hf"] is True


@pytest.fixture(scope="module")
def moe_base(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("base") / "Qwen3-MoE-tiny"
    make_hf_model(path, moe=True, tied=False, seed=7, tokenizer_dir=tokenizer_dir)
    return path


def test_the_three_paths_train_to_the_same_losses_on_one_base(tmp_path, moe_base, small_corpus):
    losses = []
    for module, config in RECIPES:
        dump = tmp_path / config
        run_titan("train", "--module", module, "--config", config, "--model.flavor", "auto",
                  "--model.hf_assets_path", moe_base, "--checkpoint.initial_load_in_hf",
                  "--training.dataset_path", small_corpus, "--training.steps", "3",
                  "--training.seq_len", "64", "--training.local_batch_size", "2",
                  "--metrics.log_freq", "1", "--job.dump_folder", dump)
        losses.append([m["loss"] for m in read_metrics(dump)])
        assert (dump / "hf" / "step-3" / "config.json").exists()
    for path, other in zip(RECIPES[1:], losses[1:]):
        for a, b in zip(losses[0], other):
            assert math.isclose(a, b, rel_tol=1e-5), (path, losses)
