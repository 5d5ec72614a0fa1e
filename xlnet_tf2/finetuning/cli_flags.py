"""absl flags shared by the fine-tuning commands (experiments/run_classifier.py, run_squad.py,
run_race.py): defined here once so their help and defaults agree."""

import json

from absl import flags

FLAGS = flags.FLAGS


def define_common_flags(default_best_metric: str) -> None:
    flags.DEFINE_string("model_dir", None, "Directory for checkpoints, the best checkpoint, "
                        "evaluation results and task.json. Required.")
    flags.DEFINE_string("spm_model", None, "The SentencePiece model (spiece.model) the backbone "
                        "was pretrained with. Required; it is copied into --model_dir.")
    flags.DEFINE_string("model_config", "base", "A preset name (base, large, tiny) or the path "
                        "of an xlnet_config.json (original or ours).")
    flags.DEFINE_string("init_checkpoint", None, "Backbone weights to start from: a converted "
                        "release directory, or a checkpoint (prefix or directory) of our "
                        "pretraining. Unset: random initialization.")
    flags.DEFINE_integer("seq_len", 128, "Tokens per example, special tokens included; longer "
                         "inputs are truncated from the end of the longer text.")
    flags.DEFINE_integer("train_steps", 1000, "Number of optimizer steps.")
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size (all replicas).")
    flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size (every batch is padded "
                         "to this size so shapes stay static).")
    flags.DEFINE_float("learning_rate", 2e-5, "Peak learning rate.")
    flags.DEFINE_integer("warmup_steps", 0, "Linear warmup steps before the linear decay to 0.")
    flags.DEFINE_float("weight_decay", 0.0, "Decoupled weight decay (LayerNorm and biases "
                       "exempt).")
    flags.DEFINE_float("adam_epsilon", 1e-6, "Adam epsilon.")
    flags.DEFINE_float("clip_norm", 1.0, "Clip gradients to this global norm.")
    flags.DEFINE_float("layer_decay", 1.0, "Layer-wise learning-rate decay: block i of n learns "
                       "at lr * decay**(n-1-i), the embeddings at lr * decay**n, the head at lr "
                       "(e.g. 0.75 for SQuAD with XLNet-large).")
    flags.DEFINE_integer("eval_every", 500, "Evaluate (and keep the best checkpoint) every this "
                         "many steps, and at the end.")
    flags.DEFINE_integer("steps_per_loop", 1, "Training steps run inside one tf.function call "
                         "between returns to Python (the pretraining loop's setting); loops end "
                         "at evaluation and log steps. Larger values cut host overhead on TPU.")
    flags.DEFINE_integer("log_steps", 50, "Log loss, learning rate, tokens/s and MFU every this "
                         "many steps.")
    flags.DEFINE_string("best_metric", None, "The evaluation metric that picks the best "
                        f"checkpoint (default {default_best_metric}; regression: pearson).")
    flags.DEFINE_enum("precision", "float32", ["float32", "mixed_bfloat16", "mixed_float16"],
                      "Compute precision, as in pretraining.")
    flags.DEFINE_bool("jit_compile", False, "XLA-compile the forward/backward step.")
    flags.DEFINE_enum("strategy", "auto", ["auto", "one_device", "mirrored", "multi_worker", "tpu"],
                      "Distribution strategy, as in pretraining.")
    flags.DEFINE_string("tpu", None, "Cloud TPU name or address (with --strategy=tpu).")
    flags.DEFINE_float("dropout", 0.1, "Backbone dropout rate.")
    flags.DEFINE_float("dropatt", 0.1, "Attention-probability dropout rate.")
    flags.DEFINE_float("head_dropout", 0.1, "Dropout in the task head.")
    flags.DEFINE_bool("lower", False, "Lowercase text (only for uncased models).")
    flags.DEFINE_integer("seed", 0, "Random seed (initialization, shuffling, dropout).")
    flags.mark_flags_as_required(["model_dir", "spm_model"])


def strategy_from_flags():
    from xlnet_tf2.training.distribution import resolve_strategy

    return resolve_strategy(FLAGS.strategy, FLAGS.tpu)


def model_config():
    from xlnet_tf2.config import XLNetConfig

    return XLNetConfig.resolve(FLAGS.model_config, dropout=FLAGS.dropout, dropatt=FLAGS.dropatt,
                               mem_len=0)


def finetune_config(default_metric: str):
    from xlnet_tf2.finetuning.trainer import FinetuneConfig

    metric = FLAGS.best_metric or default_metric
    return FinetuneConfig(
        model_dir=FLAGS.model_dir, train_steps=FLAGS.train_steps,
        train_batch_size=FLAGS.train_batch_size, learning_rate=FLAGS.learning_rate,
        warmup_steps=FLAGS.warmup_steps, weight_decay=FLAGS.weight_decay,
        adam_epsilon=FLAGS.adam_epsilon, clip_norm=FLAGS.clip_norm, layer_decay=FLAGS.layer_decay,
        eval_every=FLAGS.eval_every, log_steps=FLAGS.log_steps,
        steps_per_loop=FLAGS.steps_per_loop, precision=FLAGS.precision,
        jit_compile=FLAGS.jit_compile, seed=FLAGS.seed, init_checkpoint=FLAGS.init_checkpoint,
        best_metric=metric, best_mode="min" if metric in ("mse", "loss") else "max")


def report(result) -> None:
    print(json.dumps({"final_step": result.final_step, "best": result.best}, indent=2), flush=True)
