"""TRL 1.16's DPOTrainer driven on the CPU step by step, as the peer of `titan train
--training.objective dpo` (docs/preference.md): the same model folder, records, batch, order
(sequential), optimizer (torch.optim.AdamW, no weight decay, constant lr, clipping at 1.0) and
float32, so that its per-step logs are what titan's metrics.jsonl must hold."""
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer, TrainerCallback  # noqa: E402
from trl import DPOConfig, DPOTrainer  # noqa: E402

# The DPO metrics titan logs, by TRL's names (and the trainer's own loss and grad_norm).
METRICS = ["loss", "grad_norm", "rewards/chosen", "rewards/rejected", "rewards/accuracies",
           "rewards/margins", "logps/chosen", "logps/rejected"]

# Six pairs in each of TRL's layouts.
QA = [
    ("What color is the sky?", "It is blue.", "It is green."),
    ("What is 2 + 2?", "4", "5, obviously."),
    ("Name a fruit.", "An apple.", "A chair."),
    ("Where does the sun rise?", "In the east.", "In the west, of course."),
    ("Is water wet?", "Yes.", "No, water is dry."),
    ("Say hello.", "Hello!", "Goodbye."),
]


def records(layout):
    if layout == "standard":
        return [{"prompt": f"Q: {q}\nA:", "chosen": f" {c}", "rejected": f" {r}"} for q, c, r in QA]
    if layout == "conversational":
        return [{"prompt": [{"role": "user", "content": q}],
                 "chosen": [{"role": "assistant", "content": c}],
                 "rejected": [{"role": "assistant", "content": r}]} for q, c, r in QA]
    if layout == "implicit":
        return [{"chosen": [{"role": "user", "content": q}, {"role": "assistant", "content": c}],
                 "rejected": [{"role": "user", "content": q}, {"role": "assistant", "content": r}]}
                for q, c, r in QA]
    raise ValueError(layout)


class _Logs(TrainerCallback):
    def __init__(self):
        self.steps = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs and "train_runtime" not in logs:
            self.steps.append({k: logs[k] for k in METRICS})


def trl_dpo(model_dir, rows, steps=4, batch=2, lr=1e-3, loss_type=("sigmoid",), beta=0.1,
            peft_config=None, max_length=1024, model=None, adapters_off=False,
            router_aux_loss_coef=None, precompute=False):
    """TRL's per-step logs ({metric: value} per optimizer step) of a DPO run: of the model in
    `model_dir`, or of `model` (e.g. a PeftModel with its starting adapter, which TRL copies as
    the reference) with the tokenizer of `model_dir`. With `adapters_off` that copy is dropped
    before training, so that TRL's reference is its other PEFT one: the adapters disabled.
    `router_aux_loss_coef`: TRL's weight of a MoE model's auxiliary loss (None: the config's).
    `precompute`: TRL's precompute_ref_log_probs (the reference's log-probabilities computed
    before training; without PEFT no reference model is then kept)."""
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    logs = _Logs()
    with tempfile.TemporaryDirectory() as out:
        args = DPOConfig(
            output_dir=out, per_device_train_batch_size=batch, max_steps=steps, learning_rate=lr,
            optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
            weight_decay=0.0, max_grad_norm=1.0, warmup_steps=0, lr_scheduler_type="constant",
            seed=42, use_cpu=True, logging_steps=1, report_to="none", save_strategy="no",
            bf16=False, gradient_checkpointing=False,  # TRL's defaults are True for both
            beta=beta, loss_type=list(loss_type), max_length=max_length,
            train_sampling_strategy="sequential",
            model_init_kwargs={"dtype": "float32"} if model is None else None,
            router_aux_loss_coef=router_aux_loss_coef, dataloader_num_workers=0,
            precompute_ref_log_probs=precompute)
        trainer = DPOTrainer(model=str(model_dir) if model is None else model, args=args,
                             train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                             callbacks=[logs], peft_config=peft_config)
        if adapters_off:
            trainer.model.delete_adapter("ref")
        trainer.train()
    return logs.steps


def trl_dpo_eval(model_dir, ref_dir, rows, loss_type=("sigmoid",), beta=0.1, max_length=1024):
    """TRL's DPOTrainer.evaluate() of the model in `model_dir` against the one in `ref_dir` on
    `rows`, all in one batch: {metric: value} by titan's names."""
    from transformers import AutoModelForCausalLM
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    ref = AutoModelForCausalLM.from_pretrained(str(ref_dir), dtype="float32")
    with tempfile.TemporaryDirectory() as out:
        args = DPOConfig(
            output_dir=out, per_device_eval_batch_size=len(rows), use_cpu=True,
            report_to="none", save_strategy="no", bf16=False, gradient_checkpointing=False,
            beta=beta, loss_type=list(loss_type), max_length=max_length,
            model_init_kwargs={"dtype": "float32"}, dataloader_num_workers=0)
        data = Dataset.from_list(rows)
        trainer = DPOTrainer(model=str(model_dir), ref_model=ref, args=args, train_dataset=data,
                             eval_dataset=data, processing_class=tokenizer)
        logs = trainer.evaluate()
    return {k[len("eval_"):]: v for k, v in logs.items() if k.startswith("eval_")}
