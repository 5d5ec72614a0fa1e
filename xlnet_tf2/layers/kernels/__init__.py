"""The device forms of the layers' pieces that a CPU's step does not trace, one module each
behind one call the math makes; the step's plan (layers/step_plan.py) picks among them. The
reference forms (TensorFlow ops, what a CPU traces) live with the math: the attention op in
layers/xlnet_block.py, the dropout masks' hash and the CPU's stored mask in layers/dropout.py.

  cudnn.py             the attention op as cuDNN's flash attention (XLA custom calls; GPU)
  triton_attention.py  the attention op as the project's flash Triton kernels, emitted as XLA
                       custom calls by triton_call.py (GPU), and their check on the device;
                       the kernels themselves, forward and backward, with the position scores
                       made tile by tile and the dropout hash: flash_relative_attention.py
  dropout_masks.py     a stored dropout mask bit-packed (GPU)
  window_read.py       the shift of query rows at arbitrary positions as a gather (GPU, TPU)
  angle_scores.py      the position scores as a product with an angle table, no shift (TPU)
  pallas_attention.py  the attention op as the project's flash Pallas kernels, emitted as XLA
                       tpu_custom_calls by pallas_call.py (TPU); the kernels themselves (JAX),
                       forward and backward, the position scores of each row tile against the
                       band of the position embedding's projection it needs, shifted in VMEM,
                       with the dropout hash: pallas_relative_attention.py
  attention_choice.py  which implementation computes the attention op where the plan may take
                       a kernel (`StepPlan.kernel_attention`), a forced one's refusal

A new implementation of the attention op is a module here, a name in
config.ATTENTION_IMPLEMENTATIONS and a branch in attention_choice.py's `chosen_implementation`;
a new device form of another piece is a module here and a property of StepPlan that says where
it runs.
"""
