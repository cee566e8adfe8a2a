#include "step_run.h"

#include "runner_kernels.h"

namespace trainsim::gpu::detail {

// Forward of local layer l (the chunk's layer j) from A[j].x into A[j+1].x, writing the kept
// tensors into `x`.
void StepRun::layer_forward(std::vector<LayerActs>& A, int j, int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed) {
  const LayerParams& P = lp[l];
  if (llama) {
    ew("rmsnorm", [&] { rmsnorm_forward(A[j].x, Wp(P.ln1_g), x.ln1, x.rstd1, T, h, st); });
    gemm(false, false, T, qkv_w, h, x.ln1, Wp(P.wqkv), s_wide, false);
    ew("qkv_split", [&] { split_qkv_gqa(s_wide, x.q, x.k, x.v, bsz, s, al, kvhl, d, st); });
    ew("rope", [&] {
      rope(x.q, bsz * al, s, d, false, st);
      rope(x.k, bsz * kvhl, s, d, false, st);
    });
    attn_fwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, nullptr, nullptr, dctx}, 0, 0.0f, st);
    ew("attention_merge_heads", [&] { heads_to_rows(dctx, x.ctx, bsz, s, al, d, st); });
    gemm(false, false, T, h, hl, x.ctx, Wp(P.wo), s_h, false);
    tp_sum(s_h, Th);
    ew("residual", [&] { residual_add(s_h, A[j].x, x.xmid, Th, st); });
    ew("rmsnorm", [&] { rmsnorm_forward(x.xmid, Wp(P.ln2_g), x.ln2, x.rstd2, T, h, st); });
    gemm(false, false, T, fc1_w, h, x.ln2, Wp(P.w1), x.gin, false);
    ew("swiglu", [&] { swiglu(x.gin, x.gout, T, fl, st); });
    gemm(false, false, T, h, fl, x.gout, Wp(P.w2), s_h, false);
    tp_sum(s_h, Th);
    ew("residual", [&] { residual_add(s_h, x.xmid, A[j + 1].x, Th, st); });
    return;
  }
  ew("layernorm", [&] { layernorm_forward(A[j].x, Wp(P.ln1_g), Wp(P.ln1_b), x.ln1, x.mean1, x.rstd1, T, h, st); });
  gemm(false, false, T, 3 * hl, h, x.ln1, Wp(P.wqkv), s_wide, false);
  ew("qkv_bias_split", [&] { split_heads(s_wide, Wp(P.bqkv), x.q, x.k, x.v, bsz, s, al, d, st); });
  attn_fwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, dctx}, seed * 4 + 1, kDropout, st);
  ew("attention_merge_heads", [&] { heads_to_rows(dctx, x.ctx, bsz, s, al, d, st); });
  gemm(false, false, T, h, hl, x.ctx, Wp(P.wo), s_h, false);
  tp_sum(s_h, Th);
  ew("bias_dropout_residual", [&] { bias_dropout_residual(s_h, Wp(P.bo), A[j].x, x.xmid, x.mask_attn, T, h, seed * 4 + 2, st); });
  ew("layernorm", [&] { layernorm_forward(x.xmid, Wp(P.ln2_g), Wp(P.ln2_b), x.ln2, x.mean2, x.rstd2, T, h, st); });
  gemm(false, false, T, fl, h, x.ln2, Wp(P.w1), s_wide, false);
  ew("bias_gelu", [&] { bias_gelu(s_wide, Wp(P.b1), x.gin, x.gout, T, fl, st); });
  gemm(false, false, T, h, fl, x.gout, Wp(P.w2), s_h, false);
  tp_sum(s_h, Th);
  ew("bias_dropout_residual", [&] { bias_dropout_residual(s_h, Wp(P.b2), x.xmid, A[j + 1].x, x.mask_mlp, T, h, seed * 4 + 3, st); });
}

// Recomputes only the attention core of layer l (selective recompute).
void StepRun::attention_core(LayerActs& x, bf16* p, bf16* pd, unsigned char* pm, unsigned seed) {
  attn_fwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, dq}, seed * 4 + 1, dropout, st);
}

// Backward of local layer l (the chunk's layer j): dx holds d(A[j+1].x) on entry and d(A[j].x)
// on exit.
void StepRun::layer_backward(std::vector<LayerActs>& A, int j, int l, LayerActs& x, bf16* p, bf16* pd, unsigned char* pm) {
  const LayerParams& P = lp[l];
  if (llama) {
    // MLP: out = xmid + swiglu(ln2 W1) W2; dx is also the branch's gradient (no dropout).
    gemm(true, false, fl, h, T, x.gout, dx, Gp(P.w2), true, 1.0f, 1.0f);
    gemm(false, true, T, fl, h, dx, Wp(P.w2), dff, false);
    ew("swiglu.bwd", [&] { swiglu_backward(dff, x.gin, s_wide, T, fl, st); });
    gemm(true, false, h, fc1_w, T, x.ln2, s_wide, Gp(P.w1), true, 1.0f, 1.0f);
    gemm(false, true, T, h, fc1_w, s_wide, Wp(P.w1), dln, false);
    tp_sum(dln, Th);
    ew("rmsnorm.bwd", [&] {
      rmsnorm_backward(dln, x.xmid, Wp(P.ln2_g), x.rstd2, dtmp, Gp(P.ln2_g), T, h, st);
      add_inplace(dx, dtmp, Th, st);  // dx = d(xmid)
    });
    // Attention: xmid = x + ctx Wo
    gemm(true, false, hl, h, T, x.ctx, dx, Gp(P.wo), true, 1.0f, 1.0f);
    gemm(false, true, T, hl, h, dx, Wp(P.wo), dln, false);
    ew("attention_split_heads.bwd", [&] { rows_to_heads(dln, dctx, bsz, s, al, d, st); });
    attn_bwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, nullptr, nullptr, nullptr}, dctx, dS, dq, dk, dv, 0.0f, st);
    ew("rope.bwd", [&] {
      rope(dq, bsz * al, s, d, true, st);
      rope(dk, bsz * kvhl, s, d, true, st);
    });
    ew("qkv_merge.bwd", [&] { merge_qkv_gqa_grad(dq, dk, dv, s_wide, bsz, s, al, kvhl, d, st); });
    gemm(true, false, h, qkv_w, T, x.ln1, s_wide, Gp(P.wqkv), true, 1.0f, 1.0f);
    gemm(false, true, T, h, qkv_w, s_wide, Wp(P.wqkv), dln, false);
    tp_sum(dln, Th);
    ew("rmsnorm.bwd", [&] {
      rmsnorm_backward(dln, A[j].x, Wp(P.ln1_g), x.rstd1, dtmp, Gp(P.ln1_g), T, h, st);
      add_inplace(dx, dtmp, Th, st);
    });
    return;
  }
  // MLP: out = xmid + drop(gout W2 + b2)
  ew("dropout_residual.bwd", [&] {
    dropout_backward(dx, x.mask_mlp, dtmp, Th, st);
    column_sum(dtmp, Gp(P.b2), T, h, st);
  });
  gemm(true, false, fl, h, T, x.gout, dtmp, Gp(P.w2), true, 1.0f, 1.0f);
  gemm(false, true, T, fl, h, dtmp, Wp(P.w2), dff, false);
  ew("gelu_bias.bwd", [&] {
    gelu_backward(dff, x.gin, dff, Tfl, st);
    column_sum(dff, Gp(P.b1), T, fl, st);
  });
  gemm(true, false, h, fl, T, x.ln2, dff, Gp(P.w1), true, 1.0f, 1.0f);
  gemm(false, true, T, h, fl, dff, Wp(P.w1), dln, false);
  tp_sum(dln, Th);
  ew("layernorm.bwd", [&] {
    layernorm_backward(dln, x.xmid, Wp(P.ln2_g), x.mean2, x.rstd2, dtmp, Gp(P.ln2_g), Gp(P.ln2_b), T, h, st);
    add_inplace(dx, dtmp, Th, st);  // dx = d(xmid)
  });
  // Attention: xmid = x + drop(ctx Wo + bo)
  ew("dropout_residual.bwd", [&] {
    dropout_backward(dx, x.mask_attn, dtmp, Th, st);
    column_sum(dtmp, Gp(P.bo), T, h, st);
  });
  gemm(true, false, hl, h, T, x.ctx, dtmp, Gp(P.wo), true, 1.0f, 1.0f);
  gemm(false, true, T, hl, h, dtmp, Wp(P.wo), dln, false);
  ew("attention_split_heads.bwd", [&] { rows_to_heads(dln, dctx, bsz, s, al, d, st); });
  attn_bwd(cb, shape, AttentionBuffers{x.q, x.k, x.v, p, pd, pm, nullptr}, dctx, dS, dq, dk, dv, kDropout, st);
  ew("qkv_merge_bias.bwd", [&] {
    merge_qkv_grad(dq, dk, dv, s_wide, bsz, s, al, d, st);
    column_sum(s_wide, Gp(P.bqkv), T, 3 * hl, st);
  });
  gemm(true, false, h, 3 * hl, T, x.ln1, s_wide, Gp(P.wqkv), true, 1.0f, 1.0f);
  gemm(false, true, T, h, 3 * hl, s_wide, Wp(P.wqkv), dln, false);
  tp_sum(dln, Th);
  ew("layernorm.bwd", [&] {
    layernorm_backward(dln, A[j].x, Wp(P.ln1_g), x.mean1, x.rstd1, dtmp, Gp(P.ln1_g), Gp(P.ln1_b), T, h, st);
    add_inplace(dx, dtmp, Th, st);
  });
}

// Forward of one micro-batch on this stage, into the slot's activations (stage 0 embeds the
// tokens; the others have received their input into slot[0].x); the last stage ends with the
// loss and d(logits).
void StepRun::forward_pass(int ch, int slot_i, unsigned seed) {
  std::vector<LayerActs>& A = acts[slot_i];
  const int cn = chunk_layers[ch].second, lb = chunk_begin[ch];
  const bool embeds = first && ch == 0, heads = last && ch == vpp - 1;
  if (embeds) use_weights(nb - 1, nb - 2);  // ZeRO-3: the embeddings' bucket, and the next one ahead
  if (embeds && llama) {
    ew("embedding", [&] { embed_lookup(tokens, Wp(wte), A[0].x, T, h, v0, Vl, st); });
    tp_sum(A[0].x, Th);
  } else if (embeds) {
    if (tp == 1) {
      ew("embedding", [&] { embed_forward(tokens, Wp(wte), Wp(wpe), A[0].x, emb_mask[slot_i], T, h, s, seed * 1000, st); });
    } else {
      embed_lookup(tokens, Wp(wte), s_h, T, h, v0, Vl, st);
      tp_sum(s_h, Th);
      embed_finish(s_h, Wp(wpe), A[0].x, emb_mask[slot_i], T, h, s, seed * 1000, st);
    }
  }
  for (int j = 0; j < cn; ++j) {
    const int l = lb + j;
    LayerActs& x = keep_layers ? A[j] : work;
    bf16* p = keep_scores ? x.p : keep_layers ? sp : work.p;
    bf16* pd = keep_scores ? x.pd : keep_layers ? spd : work.pd;
    unsigned char* pm = keep_scores ? x.pmask : keep_layers ? spmask : work.pmask;
    if (zs >= 3 && layout.bucket_of(lp[l].ln1_g) != cur_unit) use_weights(layout.bucket_of(lp[l].ln1_g), layout.bucket_of(lp[l].ln1_g) - 1);
    layer_forward(A, j, l, x, p, pd, pm, seed * 1000 + glob[l] + 1);
  }
  if (heads) {
    use_weights_of(lnf_g);
    use_weights_of(head);
    if (llama) ew("rmsnorm", [&] { rmsnorm_forward(A[cn].x, Wp(lnf_g), lnf, rstdf, T, h, st); });
    else ew("layernorm", [&] { layernorm_forward(A[cn].x, Wp(lnf_g), Wp(lnf_b), lnf, meanf, rstdf, T, h, st); });
    gemm(false, true, T, Vl, h, lnf, Wp(head), logits, false);
    // Mean over every token of the step, across replicas too: the summed gradients are the mean's.
    if (tp == 1) {
      ew("cross_entropy", [&] { cross_entropy(logits, logits32, tokens, loss, T, V, loss_scale, st); });
    } else {
      float* all = ce_stats + static_cast<size_t>(T) * 3;
      cross_entropy_stats(logits, logits32, tokens, ce_stats, T, v0, Vl, st);
      c.tp_comm->all_gather(ce_stats, all, static_cast<size_t>(T) * 3 * sizeof(float), st);
      cross_entropy_finish(logits, logits32, tokens, all, tp, loss, T, v0, Vl, loss_scale, st);
    }
  }
}

// Backward of one micro-batch through chunk ch (the last virtual stage from d(logits); the
// others from d(output) received into dx), leaving d(input) in dx. In a chunk's last
// micro-batch, buckets are launched as their layers finish.
void StepRun::backward_pass(int ch, int slot_i, unsigned seed, bool last_mb) {
  std::vector<LayerActs>& A = acts[slot_i];
  const int cn = chunk_layers[ch].second, lb = chunk_begin[ch];
  const bool embeds = first && ch == 0, heads = last && ch == vpp - 1;
  // Buckets are summed in the step's last micro-batch, under ZeRO-2/3 in every one.
  const bool reduce_now = last_mb || zs >= 2;
  if (zs >= 2) {
    pending_begin = pending_end = n;
    buckets = 0;
  }
  open_grad_bucket(nb - 1);  // ZeRO-2/3: the embeddings' bucket and the first one
  open_grad_bucket(0);
  if (heads) {
    if (zs >= 3) use_weights(layout.bucket_of(lnf_g), layout.bucket_of(lnf_g) + 1);
    use_weights_of(head);
    // Backward through the head (logits now hold d(logits)).
    gemm(true, false, Vl, h, T, logits, lnf, Gp(head), true, 1.0f, 1.0f);
    gemm(false, false, T, h, Vl, logits, Wp(head), dln, false);
    tp_sum(dln, Th);
    if (llama) ew("rmsnorm.bwd", [&] { rmsnorm_backward(dln, A[cn].x, Wp(lnf_g), rstdf, dx, Gp(lnf_g), T, h, st); });
    else ew("layernorm.bwd", [&] { layernorm_backward(dln, A[cn].x, Wp(lnf_g), meanf, rstdf, dx, Gp(lnf_g), Gp(lnf_b), T, h, st); });
  }
  for (int j = cn - 1; j >= 0; --j) {
    const int l = lb + j;
    const unsigned seed_l = seed * 1000 + glob[l] + 1;
    if (zs >= 2) {
      const int u = layout.bucket_of(lp[l].ln1_g);
      if (zs >= 3 && u != cur_unit) use_weights(u, u + 1);
      open_grad_bucket(u);
    }
    if (c.recompute == 2) {
      layer_forward(A, j, l, work, work.p, work.pd, work.pmask, seed_l);
      layer_backward(A, j, l, work, work.p, work.pd, work.pmask);
    } else if (c.recompute == 1) {
      attention_core(A[j], sp, spd, spmask, seed_l);
      layer_backward(A, j, l, A[j], sp, spd, spmask);
    } else {
      layer_backward(A, j, l, A[j], A[j].p, A[j].pd, A[j].pmask);
    }
    if (reduce_now) {
      pending_begin = lp[l].ln1_g;
      launch_bucket(false);
    }
  }
  if (embeds && llama) ew("embedding.bwd", [&] { embed_rows_backward(dx, tokens, Gp(wte), T, h, v0, Vl, st); });
  else if (embeds) ew("embedding.bwd", [&] { embed_backward(dx, emb_mask[slot_i], tokens, Gp(wte), Gp(wpe), T, h, s, st, v0, Vl); });
  if (reduce_now && pp == 1) final_bucket();
}

}  // namespace trainsim::gpu::detail
