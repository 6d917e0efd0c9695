"""The Triton code of the fused kernels (`model/kernels/__init__.py` launches them): imported on first launch only, so
that a server that never runs them never imports Triton."""

import triton
import triton.language as tl


@triton.jit
def dot_rounded(x, w, IN_FLOAT32: tl.constexpr):
    """x (float32) @ w, x rounded to w's dtype as the matrix units take it. `IN_FLOAT32` multiplies in float32 with
    x as it is: for float32 weights, and in the interpreter, whose half-precision products are wrong and whose
    roundings truncate."""
    if IN_FLOAT32:
        return tl.dot(x, w.to(tl.float32), input_precision="ieee")
    return tl.dot(x.to(w.dtype), w)


@triton.jit
def norm_matmul_kernel(
    x_ptr,
    norm_ptr,
    w_ptr,
    bias_ptr,
    residual_ptr,
    out_ptr,
    M,
    N,
    stride_xm,
    stride_rm,
    stride_om,
    eps,
    K: tl.constexpr,
    HAS_NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    EPILOGUE: tl.constexpr,
    IN_FLOAT32: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, col_ok = rows < M, cols < N
    scale = tl.full((BLOCK_M,), 1.0, tl.float32)
    if HAS_NORM:  # the row's root mean square, over all of K, before the product
        squares = tl.zeros((BLOCK_M,), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + rows[:, None] * stride_xm + ks[None, :], (row_ok[:, None]) & (ks[None, :] < K), 0.0)
            x = x.to(tl.float32)
            squares += tl.sum(x * x, axis=1)
        scale = 1.0 / tl.sqrt(squares / K + eps)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        x = tl.load(x_ptr + rows[:, None] * stride_xm + ks[None, :], row_ok[:, None] & k_ok[None, :], 0.0)
        x = x.to(tl.float32) * scale[:, None]
        if HAS_NORM:
            x = x * tl.load(norm_ptr + ks, k_ok, 0.0).to(tl.float32)[None, :]
        w = tl.load(w_ptr + cols[None, :] * K + ks[:, None], col_ok[None, :] & k_ok[:, None], 0.0)
        acc += dot_rounded(x, w, IN_FLOAT32)
        if EPILOGUE == 1:  # the up half's rows sit N below the gate's
            w_up = tl.load(w_ptr + (cols[None, :] + N) * K + ks[:, None], col_ok[None, :] & k_ok[:, None], 0.0)
            up += dot_rounded(x, w_up, IN_FLOAT32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, col_ok, 0.0).to(tl.float32)[None, :]
    if EPILOGUE == 1:
        acc = acc * tl.sigmoid(acc) * up
    mask = row_ok[:, None] & col_ok[None, :]
    if HAS_RESIDUAL:
        acc += tl.load(residual_ptr + rows[:, None] * stride_rm + cols[None, :], mask, 0.0).to(tl.float32)
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask)


@triton.jit
def rotate(x_ptr, norm_ptr, cos_ptr, sin_ptr, offs, rolled, position, eps, D: tl.constexpr):
    """One head's vector normed over D (with its weight) and rotated at `position`, in float32."""
    x = tl.load(x_ptr + offs).to(tl.float32)
    x_rolled = tl.load(x_ptr + rolled).to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    x = x * scale * tl.load(norm_ptr + offs).to(tl.float32)
    x_rolled = x_rolled * scale * tl.load(norm_ptr + rolled).to(tl.float32)
    return x * tl.load(cos_ptr + position * D + offs) + x_rolled * tl.load(sin_ptr + position * D + offs)


@triton.jit
def attend_kernel(
    qkv_ptr,
    q_norm_ptr,
    k_norm_ptr,
    cos_ptr,
    sin_ptr,
    k_cache_ptr,
    v_cache_ptr,
    out_ptr,
    start,
    eps,
    sm_scale,
    stride_cb,
    stride_ch,
    TOKENS: tl.constexpr,
    HEADS: tl.constexpr,
    KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    D: tl.constexpr,
    SLOTS: tl.constexpr,
):
    row, kv_head = tl.program_id(0), tl.program_id(1)
    offs = tl.arange(0, D)
    rolled = (offs + D // 2) % D
    slots = tl.arange(0, SLOTS)
    width = (HEADS + 2 * KV_HEADS) * D
    cache = row * stride_cb + kv_head * stride_ch
    for t in tl.static_range(TOKENS):
        position = start + t
        token = qkv_ptr + (row * TOKENS + t) * width
        k = rotate(token + (HEADS + kv_head) * D, k_norm_ptr, cos_ptr, sin_ptr, offs, rolled, position, eps, D)
        v = tl.load(token + (HEADS + KV_HEADS + kv_head) * D + offs)
        tl.store(k_cache_ptr + cache + position * D + offs, k.to(k_cache_ptr.dtype.element_ty))
        tl.store(v_cache_ptr + cache + position * D + offs, v)
        tl.debug_barrier()  # the keys just written are read back below, by other threads of this program
        seen = slots <= position
        keys = tl.load(k_cache_ptr + cache + slots[:, None] * D + offs[None, :], seen[:, None], 0.0)
        values = tl.load(v_cache_ptr + cache + slots[:, None] * D + offs[None, :], seen[:, None], 0.0)
        keys, values = keys.to(tl.float32), values.to(tl.float32)
        for g in tl.static_range(GROUP):
            head = kv_head * GROUP + g
            q = rotate(token + head * D, q_norm_ptr, cos_ptr, sin_ptr, offs, rolled, position, eps, D)
            q = q.to(k_cache_ptr.dtype.element_ty).to(tl.float32)  # the query in the cache's dtype, as SDPA
            scores = tl.sum(keys * q[None, :], axis=1) * sm_scale
            scores = tl.where(seen, scores, float("-inf"))
            weights = tl.exp(scores - tl.max(scores, axis=0))
            weights = weights / tl.sum(weights, axis=0)
            mixed = tl.sum(values * weights[:, None], axis=0)
            out = out_ptr + (row * TOKENS + t) * HEADS * D + head * D
            tl.store(out + offs, mixed.to(out_ptr.dtype.element_ty))


@triton.jit
def sortable(x):
    """float32 values as int32 keys in the same order (the sign-magnitude bits made two's complement)."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def sample_kernel(
    logits_ptr,
    do_sample_ptr,
    temperature_ptr,
    top_k_ptr,
    top_p_ptr,
    uniform_ptr,
    codes_ptr,
    table_ptr,
    next_ptr,
    V,
    stride_l,
    stride_u,
    stride_c,
    H: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    row = tl.program_id(0)
    ids = tl.arange(0, BLOCK_V)
    valid = ids < V
    scores = tl.load(logits_ptr + row * stride_l + ids, valid, float("-inf")).to(tl.float32)
    best = tl.max(scores, axis=0)
    chosen = tl.min(tl.where(scores == best, ids, BLOCK_V), axis=0)  # the first of the best, as argmax
    if tl.load(do_sample_ptr + row) != 0:
        scores = scores / tl.load(temperature_ptr + row)
        keys = sortable(scores)
        top_k = tl.load(top_k_ptr + row).to(tl.int32)
        top_k = tl.where((top_k > 0) & (top_k < V), top_k, V)
        # top-k: the k-th largest score, found by halving the range of keys (no sort)
        low, high = tl.min(keys, axis=0).to(tl.int64), tl.max(keys, axis=0).to(tl.int64)
        for _ in tl.static_range(33):
            middle = low + (high - low + 1) // 2  # on a non-negative span: Triton's // truncates toward zero
            enough = tl.sum((keys >= middle).to(tl.int32), axis=0) >= top_k
            low, high = tl.where(enough, middle, low), tl.where(enough, high, middle - 1)
        scores = tl.where(keys < low, float("-inf"), scores)
        # top-p: a code stays while the probability of the codes above it is < top_p (the official rule: the
        # low tail whose cumulative probability is <= 1 - top_p goes); the best code always stays
        shares = tl.exp(scores - tl.max(scores, axis=0))
        probabilities = shares / tl.sum(shares, axis=0)
        top_p = tl.load(top_p_ptr + row)
        low, high = tl.min(keys, axis=0).to(tl.int64), tl.max(keys, axis=0).to(tl.int64)
        for _ in tl.static_range(33):
            middle = low + (high - low) // 2
            kept = tl.sum(tl.where(keys > middle, probabilities, 0.0), axis=0) < top_p
            low, high = tl.where(kept, low, middle + 1), tl.where(kept, middle, high)
        scores = tl.where(keys < low, float("-inf"), scores)
        shares = tl.exp(scores - tl.max(scores, axis=0))
        cumulative = tl.cumsum((shares / tl.sum(shares, axis=0)).to(tl.float64), axis=0)
        target = tl.load(uniform_ptr + row * stride_u).to(tl.float64) * tl.max(cumulative, axis=0)
        chosen = tl.minimum(tl.sum((cumulative < target).to(tl.int32), axis=0), V - 1)
    tl.store(codes_ptr + row * stride_c, chosen.to(tl.int64))
    for h0 in range(0, H, BLOCK_H):  # the chosen code's row of the table: the next pass's input
        hs = h0 + tl.arange(0, BLOCK_H)
        embedding = tl.load(table_ptr + chosen.to(tl.int64) * H + hs, hs < H)
        tl.store(next_ptr + row * H + hs, embedding, hs < H)
