#include "step_run.h"

#include "runner_kernels.h"

namespace trainsim::gpu::detail {

void StepRun::open_grad_bucket(int b) {
  if (zs < 2 || g_at[b]) return;
  const int i = slot_index(b);
  if (gfree_pending[i]) TRAINSIM_CUDA(cudaStreamWaitEvent(st, gfree[i], 0));
  g_at[b] = gslot[i];
  TRAINSIM_CUDA(cudaMemsetAsync(gslot[i], 0, layout.buckets[b].len * sizeof(float), st));
}

void StepRun::gather_weights(int b) {
  if (zs < 3 || w_at[b]) return;
  const int i = slot_index(b);
  if (w_holder[i] >= 0) {
    if (w_holder[i] == cur_unit) throw std::logic_error("step runner: a gather would overwrite the weights in use");
    w_at[w_holder[i]] = nullptr;
  }
  TRAINSIM_CUDA(cudaEventRecord(wfree, st));
  TRAINSIM_CUDA(cudaStreamWaitEvent(comm_st, wfree, 0));
  const RunnerBucket& B = layout.buckets[b];
  if (B.sh) c.comm->all_gather(W + B.so_main, wslot[i], B.sh * sizeof(bf16), comm_st);
  if (B.rem)
    TRAINSIM_CUDA(cudaMemcpyAsync(wslot[i] + dp * B.sh, W + B.so_left, B.rem * sizeof(bf16), cudaMemcpyDeviceToDevice, comm_st));
  TRAINSIM_CUDA(cudaEventRecord(wready[i], comm_st));
  w_holder[i] = b;
  w_at[b] = wslot[i];
}

// Makes bucket b's weights usable by the compute stream and prefetches bucket `next`.
void StepRun::use_weights(int b, int next) {
  if (zs < 3) return;
  gather_weights(b);
  cur_unit = b;
  TRAINSIM_CUDA(cudaStreamWaitEvent(st, wready[slot_index(b)], 0));
  if (next >= 0 && next < nb) gather_weights(next);
}

void StepRun::use_weights_of(size_t off) {
  if (zs >= 3 && !w_at[layout.bucket_of(off)]) use_weights(layout.bucket_of(off), -1);
}

void StepRun::launch_bucket(bool force) {
  if (!c.comm || pending_begin >= pending_end) return;
  if (!force && pending_end - pending_begin < bucket_elems) return;
  if (buckets_in_step >= static_cast<int>(bucket_events.size())) {
    bucket_events.emplace_back();
    TRAINSIM_CUDA(cudaEventCreateWithFlags(&bucket_events.back(), cudaEventDisableTiming));
  }
  TRAINSIM_CUDA(cudaEventRecord(bucket_events[buckets_in_step], st));
  TRAINSIM_CUDA(cudaStreamWaitEvent(comm_st, bucket_events[buckets_in_step], 0));
  if (buckets >= nb || layout.bucket_ranges[buckets] != std::make_pair(pending_begin, pending_end))
    throw std::logic_error("step runner: gradient bucket differs from the planned layout");
  const size_t len = pending_end - pending_begin;
  if (zs >= 2) {
    // This micro-batch's bucket, summed into the owned blocks.
    const RunnerBucket& B = layout.buckets[buckets];
    float* slot = g_at[buckets];
    if (B.sh) {
      c.comm->reduce_scatter_sum(slot, rs_out, B.sh, comm_st);
      add_inplace(grad + B.so_main, rs_out, B.sh, comm_st);
    }
    if (B.rem) {
      c.comm->all_reduce_sum(slot + dp * B.sh, B.rem, comm_st);
      add_inplace(grad + B.so_left, slot + dp * B.sh, B.rem, comm_st);
    }
    const int i = slot_index(buckets);
    TRAINSIM_CUDA(cudaEventRecord(gfree[i], comm_st));
    gfree_pending[i] = true;
    g_at[buckets] = nullptr;
  } else if (zs == 1) {
    const size_t sh = len / dp, rem = len - sh * dp;
    if (sh) c.comm->reduce_scatter_sum(grad + pending_begin, grad + pending_begin + replica * sh, sh, comm_st);
    if (rem) c.comm->all_reduce_sum(grad + pending_begin + dp * sh, rem, comm_st);
  } else if (topk) {
    topk_ag.run(*c.comm, grad + pending_begin, residual + pending_begin, len, c.topk_fraction, comm_st);
  } else if (c.int8_compression) {
    int8.run(*c.comm, grad + pending_begin, len, comm_st);
  } else {
    c.comm->all_reduce_sum(grad + pending_begin, len, comm_st);
  }
  ++buckets;
  ++buckets_in_step;
  pending_end = pending_begin;
}

// The rest of the gradients, with the embeddings; in a pipeline the two copies of the word
// embedding's gradient are summed first (after the schedule: stage 0 finishes last).
void StepRun::final_bucket() {
  if (pp > 1 && tied && has_wte) c.embed_comm->all_reduce_sum(grad + wte, static_cast<size_t>(Vl) * h, st);
  pending_begin = 0;
  launch_bucket(true);
}

}  // namespace trainsim::gpu::detail
