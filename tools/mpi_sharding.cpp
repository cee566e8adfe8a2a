#include "mpi_sharding.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "layout_search.h"

namespace trainsim {

namespace {
bool g_started = false;

// Every rank sends (candidate index, objective) for its share (-infinity out of memory, NaN not
// simulated by its bound: each rank's search skips only what cannot be among its own `keep` best
// nor the best of its node count, so not among the whole space's either); rank 0 orders them
// exactly as rank_evaluations would (objective, then fewer nodes, then the layout's description)
// and re-evaluates only the `keep` best (plus one out-of-memory example when nothing fits).
void gather(const Scenario& s, const std::vector<Candidate>& cands, SearchResult& r, int keep) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double kOom = -std::numeric_limits<double>::infinity();
  std::vector<double> mine;
  std::size_t ri = 0;
  for (std::size_t i = static_cast<std::size_t>(rank); i < cands.size(); i += static_cast<std::size_t>(size)) {
    double v = std::binary_search(r.bound_skipped.begin(), r.bound_skipped.end(), i) ? std::nan("") : kOom;
    // r.ranked holds this rank's simulated candidates; find this one's result.
    for (std::size_t j = 0; j < r.ranked.size(); ++j) {
      const std::size_t jj = (ri + j) % r.ranked.size();
      if (r.ranked[jj].nodes == cands[i].nodes && r.ranked[jj].layout == cands[i].layout) {
        v = objective_value(s, r.ranked[jj]);
        ri = jj;
        break;
      }
    }
    mine.push_back(static_cast<double>(i));
    mine.push_back(v);
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(size), displs(size);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> all;
  if (rank == 0) {
    int total = 0;
    for (int i = 0; i < size; ++i) { displs[i] = total; total += counts[i]; }
    all.resize(total);
  }
  MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  double wall = r.wall_s, max_wall = 0;
  MPI_Reduce(&wall, &max_wall, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank != 0) {
    r = SearchResult{};
    return;
  }
  struct Entry { std::size_t idx; double v; };
  std::vector<Entry> ok;
  std::size_t first_oom = cands.size(), n_oom = 0, n_bound = 0;
  for (std::size_t j = 0; j + 1 < all.size(); j += 2) {
    const auto idx = static_cast<std::size_t>(all[j]);
    if (std::isnan(all[j + 1])) ++n_bound;
    else if (std::isinf(all[j + 1])) { ++n_oom; first_oom = std::min(first_oom, idx); }
    else ok.push_back({idx, all[j + 1]});
  }
  std::stable_sort(ok.begin(), ok.end(), [&](const Entry& a, const Entry& b) {
    if (a.v != b.v) return a.v > b.v;
    if (cands[a.idx].nodes != cands[b.idx].nodes) return cands[a.idx].nodes < cands[b.idx].nodes;
    return describe(cands[a.idx].layout) < describe(cands[b.idx].layout);
  });
  SearchResult merged;
  merged.evaluated = cands.size();
  merged.pruned_oom = n_oom;
  merged.pruned_bound = n_bound;
  EvalOptions eo;
  eo.simulate_if_oom = false;
  // The `keep` best, and the best of every node count (for the search's per-size view), in rank
  // order.
  std::vector<int> sizes_seen;
  for (std::size_t j = 0; j < ok.size(); ++j) {
    const int nodes = cands[ok[j].idx].nodes;
    const bool first_of_size = std::find(sizes_seen.begin(), sizes_seen.end(), nodes) == sizes_seen.end();
    if (first_of_size) sizes_seen.push_back(nodes);
    if (static_cast<int>(j) < std::max(1, keep) || first_of_size)
      merged.ranked.push_back(evaluate(s, cands[ok[j].idx].layout, cands[ok[j].idx].nodes, eo));
  }
  if (merged.ranked.empty() && first_oom < cands.size())
    merged.oom.push_back(evaluate(s, cands[first_oom].layout, cands[first_oom].nodes, eo));
  merged.wall_s = max_wall;
  r = std::move(merged);
}

// The host-memory operations of `sh` over communicator `c` (sub-groups split from it stay alive
// until MPI_Finalize).
void bind_operations(Sharding& sh, MPI_Comm c) {
  sh.broadcast = [c](void* data, int bytes) { MPI_Bcast(data, bytes, MPI_BYTE, 0, c); };
  sh.all_reduce_sum = [c](float* data, std::size_t count) {
    // In chunks: MPI counts are ints.
    for (std::size_t off = 0; off < count;) {
      const int n = static_cast<int>(std::min<std::size_t>(count - off, 1u << 30));
      MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, c);
      off += static_cast<std::size_t>(n);
    }
  };
  sh.reduce_scatter_sum = [c](const float* send, float* recv, std::size_t count) {
    MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, c);
  };
  sh.all_reduce_max = [c](double* data, int count) { MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_DOUBLE, MPI_MAX, c); };
  sh.all_to_all = [c](const void* send, void* recv, std::size_t bytes) {
    MPI_Alltoall(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, c);
  };
  sh.all_gather = [c](const void* send, void* recv, std::size_t bytes) {
    MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, c);
  };
  sh.send_recv = [c](const std::vector<std::tuple<void*, std::size_t, int>>& sends, const std::vector<std::tuple<void*, std::size_t, int>>& recvs) {
    constexpr int kTag = 7;
    std::vector<MPI_Request> req;
    for (const auto& [buf, bytes, peer] : recvs) {
      req.emplace_back();
      MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, peer, kTag, c, &req.back());
    }
    for (const auto& [buf, bytes, peer] : sends) {
      req.emplace_back();
      MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, peer, kTag, c, &req.back());
    }
    MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
  };
  sh.split = [c](int color, int key) -> std::shared_ptr<Sharding> {
    MPI_Comm sub;
    MPI_Comm_split(c, color < 0 ? MPI_UNDEFINED : color, key, &sub);
    if (sub == MPI_COMM_NULL) return nullptr;
    auto g = std::make_shared<Sharding>();
    MPI_Comm_rank(sub, &g->rank);
    MPI_Comm_size(sub, &g->size);
    g->local_rank = g->rank;
    g->local_size = g->size;
    bind_operations(*g, sub);
    return g;
  };
}

}  // namespace

Sharding mpi_start(int* argc, char*** argv) {
  Sharding sh;
  // Only under a launcher: a plain run must not need an MPI runtime.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") && !std::getenv("PMIX_RANK")) return sh;
  MPI_Init(argc, argv);
  g_started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &sh.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &sh.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, sh.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &sh.local_rank);
  MPI_Comm_size(local, &sh.local_size);
  MPI_Comm_free(&local);
  if (sh.size > 1) sh.gather = gather;
  bind_operations(sh, MPI_COMM_WORLD);
  return sh;
}

void mpi_stop() {
  if (g_started) MPI_Finalize();
}

}  // namespace trainsim
