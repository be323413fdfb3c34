"""profiling.*: every profile_freq steps one step is traced with the libtorch profiler into a
Chrome trace that holds the step's ops, and bench/profile_table.py ranks them."""
import json
import subprocess
import sys

from conftest import REPO, read_metrics, run_titan


def test_traces_of_the_chosen_steps(tmp_path, small_corpus, tokenizer_dir):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.local_batch_size", "1", "--training.seq_len", "32",
                     "--training.steps", "4", "--metrics.log_freq", "1",
                     "--job.dump_folder", tmp_path, "--training.dataset_path", small_corpus,
                     "--model.hf_assets_path", tokenizer_dir,
                     "--profiling.enable_profiling", "true", "--profiling.profile_freq", "2")
    traces = sorted((tmp_path / "profile_traces").glob("iteration_*/rank0_trace.json"))
    assert [t.parent.name for t in traces] == ["iteration_2", "iteration_4"]
    assert f"[titan] profiled step 2: {traces[0]}" in proc.stdout
    events = json.loads(traces[0].read_text())["traceEvents"]
    names = {e.get("name") for e in events if e.get("cat") == "cpu_op"}
    assert {"aten::mm", "aten::embedding"} & names, sorted(names)[:40]
    assert any(n and n.startswith("autograd::engine::evaluate_function") for n in names)
    assert len(read_metrics(tmp_path)) == 4  # tracing does not change the run
    table = subprocess.run([sys.executable, REPO / "bench" / "profile_table.py", traces[0],
                            "--top", "5"], capture_output=True, text=True, check=True).stdout
    rows = [l for l in table.splitlines() if l.startswith("| ") and "total ms" not in l]
    assert len(rows) == 5 and "CPU op" in table.splitlines()[0]
