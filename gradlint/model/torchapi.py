"""What the model knows about torch's API, as plain tables (no torch import).

Each table errs on the side of "unknown": a name missing here makes the model say it does not
know, which keeps rules quiet. Add a name only when its autograd behaviour is certain.
"""

from __future__ import annotations

# Factories: a new leaf; requires grad only with requires_grad=True.
FACTORIES = frozenset(
    "torch." + n
    for n in """tensor ones zeros empty full rand randn arange range linspace logspace eye
    ones_like zeros_like empty_like full_like rand_like randn_like randint randint_like
    randperm normal empty_strided scalar_tensor sparse_coo_tensor complex polar""".split()
)
# Rebuild a tensor from Python/NumPy data: the result has no history.
REBUILDERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.asarray"})

PARAMETER = frozenset({"torch.nn.Parameter"})

# dtypes: ``torch.<name>`` -> canonical name (floating dtypes only: the ones that can require grad)
DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
}
# integer and bool dtypes: ``torch.<name>`` -> canonical name (tensors of these can never
# require grad; complex dtypes can, and are in neither table)
INT_DTYPES = {
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16",
    "short": "int16", "int8": "int8", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool",
}
INT_DTYPE_NAMES = frozenset(INT_DTYPES.values())
# methods and torch functions whose result certainly has an integer/bool dtype
INT_CONVERSIONS = {"long": "int64", "int": "int32", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool"}
INT_RESULTS = dict(
    [(n, "int64") for n in "argmax argmin argsort nonzero count_nonzero".split()]
    + [(n, "bool") for n in """eq ne lt gt le ge isnan isinf isfinite isposinf isneginf isreal
    logical_and logical_or logical_not logical_xor isclose""".split()]
)
# the integer legacy constructors and type names (``.type(torch.LongTensor)``)
INT_TENSOR_TYPES = {
    "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
    "ByteTensor": "uint8", "BoolTensor": "bool",
}
# methods whose result has the receiver's dtype (shape, layout, copies, devices)
DTYPE_KEEPING = frozenset(
    """reshape flatten squeeze unsqueeze t transpose permute expand expand_as repeat contiguous clone
    detach cpu cuda narrow select flip roll unflatten index_select masked_select gather take tile
    repeat_interleave swapaxes swapdims movedim moveaxis diagonal pin_memory""".split()
)
# (values, indices) pairs: `x.max(1)`, `torch.sort(x)`, `x.topk(3).indices` (int64 indices)
INDEX_PAIRS_WITH_DIM = frozenset("max min median mode nanmedian".split())  # with a dim only
INDEX_PAIRS = frozenset("sort topk kthvalue cummax cummin".split())
# conversion methods that only change the dtype, and the dtype they give
DTYPE_METHODS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16"}
# factories whose result has the default floating dtype (float32 unless the file changes it)
DEFAULT_FLOAT_FACTORIES = frozenset(
    "torch." + n for n in "ones zeros empty rand randn linspace logspace eye normal".split()
)
# factories with the dtype of their first argument
LIKE_FACTORIES = frozenset(
    "torch." + n for n in "ones_like zeros_like empty_like rand_like randn_like full_like".split()
)
# legacy constructors: ``torch.FloatTensor(2, 3)`` / ``torch.Tensor([1.0])`` make a plain tensor
# of their dtype; given a tensor, they return an alias of it that keeps its graph
LEGACY_CONSTRUCTORS = {
    "torch.Tensor": "default", "torch.FloatTensor": "float32", "torch.DoubleTensor": "float64",
    "torch.HalfTensor": "float16", "torch.BFloat16Tensor": "bfloat16",
    "torch.cuda.FloatTensor": "float32", "torch.cuda.DoubleTensor": "float64",
    "torch.cuda.HalfTensor": "float16", "torch.cuda.BFloat16Tensor": "bfloat16",
    "torch.LongTensor": "int64", "torch.IntTensor": "int32", "torch.ByteTensor": "uint8", "torch.BoolTensor": "bool",
    "torch.cuda.LongTensor": "int64", "torch.cuda.IntTensor": "int32",
}
# ``torch.autograd.Variable(t, requires_grad=...)``: t.detach(), made to require grad when asked
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

# Grad-mode context managers / decorators.
GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode"})
GRAD_ON = frozenset({"torch.enable_grad"})
SET_GRAD = frozenset({"torch.set_grad_enabled"})

BACKWARD_FUNCS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})

# Tensor methods that return a differentiable tensor of their receiver (and operands).
DIFF_METHODS = frozenset(
    """abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr amax amin angle asin
    asinh atan atan2 atanh baddbmm bmm broadcast_to cos cosh cross cummax cummin cumprod cumsum
    deg2rad diag diag_embed diagonal diff digamma dist div divide dot erf erfc erfinv exp exp2
    expand expand_as expm1 fill_diagonal flatten flip fliplr flipud float_power fmod frac
    gather hypot index_add index_copy index_fill index_put index_select inner inverse kron lerp
    lgamma log log10 log1p log2 log_softmax logaddexp logcumsumexp logdet logit logsumexp
    masked_fill masked_scatter matmul matrix_exp matrix_power mean mm moveaxis movedim msort mul
    multiply mv mvlgamma nan_to_num nanmean nansum narrow neg negative norm outer permute pow prod
    rad2deg reciprocal relu remainder renorm repeat repeat_interleave reshape reshape_as roll
    rot90 rsqrt scatter scatter_add select sigmoid sign sin sinc sinh slogdet softmax sqrt square
    squeeze std sub subtract sum sum_to_size swapaxes swapdims t take take_along_dim tan tanh tile
    trace transpose tril triu true_divide trunc unflatten unfold unsqueeze var view view_as where
    xlogy clamp clip clamp_min clamp_max round floor ceil contiguous""".split()
)
# Conversions that may return ``self`` (same device/dtype): leaf-ness becomes unknown.
CONVERSION_METHODS = frozenset(
    "to cpu cuda float double half bfloat16 type type_as contiguous pin_memory".split()
)
# Views: an in-place op on a view of a leaf that requires grad raises.
VIEW_METHODS = frozenset(
    """view view_as t transpose permute unsqueeze squeeze narrow select diagonal expand
    expand_as swapaxes swapdims movedim moveaxis as_strided unflatten""".split()
)
# Results that never require grad (integer/bool outputs, metadata).
NONDIFF_METHODS = frozenset(
    """argmax argmin argsort long int bool byte char short eq ne lt gt le ge isnan isinf
    isfinite nonzero any all count_nonzero bincount equal logical_and logical_or logical_not
    logical_xor""".split()
)
# Not tensors at all.
META_METHODS = frozenset(
    """size dim ndimension numel element_size is_floating_point is_complex is_contiguous
    stride storage_offset get_device data_ptr nelement""".split()
)
TENSOR_ATTRS_VIEW = frozenset({"T", "mT", "H", "mH", "real", "imag"})
TENSOR_ATTRS_META = frozenset(
    {"shape", "dtype", "device", "requires_grad", "is_leaf", "grad_fn", "ndim", "is_cuda", "layout"}
)

# In-place methods (ending in ``_``) that do not write the tensor's data.
# (detach_ only changes autograd metadata and is allowed on a leaf; resize_ raises a different
# error; rename_/names_ change dimension names)
NOT_INPLACE = frozenset(
    {"requires_grad_", "share_memory_", "retain_grad_", "record_stream_", "detach_", "resize_",
     "resize_as_", "rename_", "names_", "set_"}
)

# torch.* and torch.nn.functional.* functions that return one differentiable tensor.
DIFF_FUNCS = frozenset(
    ["torch." + n for n in (DIFF_METHODS - {"t", "view", "view_as", "reshape_as", "expand", "expand_as", "type_as", "contiguous", "sum_to_size"})]
    + ["torch." + n for n in "cat concat concatenate stack hstack vstack dstack einsum cdist bilinear".split()]
    + [
        "torch.nn.functional." + n
        for n in """linear relu relu6 elu selu celu gelu silu mish softplus softsign leaky_relu
        hardtanh hardswish hardsigmoid logsigmoid sigmoid tanh softmax log_softmax softmin
        dropout dropout1d dropout2d dropout3d alpha_dropout conv1d conv2d conv3d
        conv_transpose1d conv_transpose2d conv_transpose3d max_pool1d max_pool2d max_pool3d
        avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d
        adaptive_avg_pool3d adaptive_max_pool2d batch_norm layer_norm group_norm instance_norm
        normalize embedding pad interpolate cross_entropy nll_loss mse_loss l1_loss
        smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div
        cosine_similarity pairwise_distance triplet_margin_loss margin_ranking_loss
        hinge_embedding_loss soft_margin_loss multilabel_soft_margin_loss poisson_nll_loss
        gaussian_nll_loss scaled_dot_product_attention glu pixel_shuffle unfold fold
        grid_sample affine_grid""".split()
    ]
    # the differentiable collectives (their backward is an all_reduce of the gradients)
    + ["torch.distributed.nn.functional.all_reduce", "torch.distributed.nn.all_reduce"]
)
NONDIFF_FUNCS = frozenset(
    ["torch." + n for n in NONDIFF_METHODS]
    + ["torch.nn.functional.one_hot", "torch.is_tensor", "torch.numel", "torch.is_grad_enabled"]
)

# nn modules without parameters: calling them is differentiable in their inputs only.
PARAMLESS_MODULES = frozenset(
    "torch.nn." + n
    for n in """ReLU ReLU6 ELU SELU CELU GELU SiLU Mish Softplus Softsign LeakyReLU Hardtanh
    Hardswish Hardsigmoid LogSigmoid Sigmoid Tanh Tanhshrink Softmax Softmax2d LogSoftmax Softmin
    Threshold Dropout Dropout1d Dropout2d Dropout3d AlphaDropout Identity Flatten Unflatten
    MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d
    AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
    Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle ZeroPad2d
    ConstantPad1d ConstantPad2d ReflectionPad1d ReflectionPad2d ReplicationPad2d
    CrossEntropyLoss NLLLoss MSELoss L1Loss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss
    KLDivLoss CosineEmbeddingLoss MarginRankingLoss HingeEmbeddingLoss SoftMarginLoss
    MultiLabelSoftMarginLoss MultiLabelMarginLoss MultiMarginLoss TripletMarginLoss
    PoissonNLLLoss GaussianNLLLoss CTCLoss CosineSimilarity PairwiseDistance""".split()
)
PARAM_MODULES = frozenset(
    "torch.nn." + n
    for n in """Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d
    ConvTranspose3d Embedding EmbeddingBag LayerNorm GroupNorm RMSNorm BatchNorm1d BatchNorm2d
    BatchNorm3d LSTM GRU RNN LSTMCell GRUCell RNNCell MultiheadAttention Transformer
    TransformerEncoder TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer
    PReLU""".split()
)
CONTAINER_MODULES = frozenset({"torch.nn.Sequential"})
# containers of modules that are not called: a module all the same (it registers what it holds)
MODULE_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict"})
MODULE_BASES = frozenset({"torch.nn.Module"})

NUMPY_FROM_TENSOR = frozenset({"numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray"})

# Ops whose backward uses their *output* (derivatives.yaml: the formula reads ``result``): an
# in-place change of the output before backward() raises there. Each one is proven in
# fixtures/GL102_inplace_on_saved_output.py.
SAVES_OUTPUT = frozenset(
    {"sigmoid", "tanh", "exp", "exp2", "expm1", "relu", "softmax", "log_softmax", "sqrt", "rsqrt", "reciprocal"}
)
# Binary ops that save an operand when the *other* operand requires grad (mul, matmul), or
# that save their input (pow with a scalar exponent).
SAVES_OTHER = frozenset({"mul", "multiply", "matmul", "mm", "bmm", "mv", "dot", "outer"})
SAVES_SELF = frozenset({"pow", "square"})
# modules and their op
MODULE_ACTS = {
    "torch.nn.Sigmoid": "sigmoid", "torch.nn.Tanh": "tanh", "torch.nn.ReLU": "relu",
    "torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax": "log_softmax", "torch.nn.Flatten": "flatten",
}
# F.* functions that take inplace=True (and modules that do)
INPLACE_KW_FUNCS = frozenset(
    "torch.nn.functional." + n
    for n in "relu relu6 elu selu celu leaky_relu hardtanh hardswish hardsigmoid silu mish dropout dropout1d dropout2d dropout3d alpha_dropout threshold rrelu".split()
)

# Operations whose positional operands after the first are tensors (an operand the model does not
# know may carry a graph); the other operations' extra arguments are sizes, dims and options.
TENSOR_OPERANDS = frozenset(
    """add sub subtract mul multiply div divide true_divide matmul mm bmm mv dot outer inner kron
    cross atan2 hypot pow fmod remainder xlogy logaddexp lerp addmm addbmm baddbmm addmv addr addcmul
    addcdiv where maximum minimum max min dist cdist cat concat concatenate stack hstack vstack
    dstack einsum bilinear linear conv1d conv2d conv3d conv_transpose1d conv_transpose2d
    conv_transpose3d embedding grid_sample scaled_dot_product_attention cosine_similarity
    pairwise_distance triplet_margin_loss margin_ranking_loss cross_entropy nll_loss mse_loss l1_loss
    smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div
    hinge_embedding_loss soft_margin_loss multilabel_soft_margin_loss poisson_nll_loss
    gaussian_nll_loss masked_fill masked_scatter index_add index_copy scatter scatter_add
    index_put""".split()
)

# Gradient clipping (reads and rescales .grad in place).
CLIP_GRAD = frozenset(
    "torch.nn.utils." + n for n in "clip_grad_norm_ clip_grad_value_ clip_grad_norm clip_grad_value".split()
) | frozenset("torch.nn.utils.clip_grad." + n for n in "clip_grad_norm_ clip_grad_value_".split())
