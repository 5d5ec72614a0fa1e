"""The device forms of the attention's pieces, one module each behind one call the math makes;
the step's plan (layers/step_plan.py) picks among them.

  attention.py         the attention op: softmax(scale * (q . k + bias)), dropout, values;
                       picks an implementation by the plan
  reference.py         the op in TensorFlow ops (everywhere; the parity tests' numbers) and the
                       narrow-probability softmax of mixed precision
  cudnn.py             the op as cuDNN's flash attention (XLA custom calls; GPU)
  position_product.py  the position scores' product with its one-layout gradient
  window_read.py       the shift of query rows at arbitrary positions as a gather (GPU, TPU)
  angle_scores.py      the position scores as a product with an angle table, no shift (TPU)
  flash_relative_attention.py  the whole attention of both streams (position scores made tile
                       by tile from k_r, segment term, bit-packed mask, the dropout hash) as
                       Triton kernels, forward and backward; triton_attention.py emits them
                       into a GPU step
  dropout_masks.py     the dropout masks' counter hash, stored and bit-packed masks

A new implementation of the op is a module here, a name in config.ATTENTION_IMPLEMENTATIONS and
a branch in attention.py; a new device form of another piece is a module here and a property of
StepPlan that says where it runs.
"""
