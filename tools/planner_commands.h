#pragma once
#include <ostream>
#include <string>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

namespace trainsim {

struct Scenario;
struct Candidate;
struct SearchResult;

// Set by the program when it runs under MPI: which share of the candidates this process evaluates,
// and how the shares come back together on rank 0 (which alone prints).
// The MPI job the planner runs in (one process when not under mpirun): `search` shards candidates
// over its ranks; `validate` runs one data-parallel replica per rank.
struct Sharding {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks on this host
  std::function<void(const Scenario&, const std::vector<Candidate>&, SearchResult&, int keep)> gather;
  std::function<void(void* data, int bytes)> broadcast;                // from rank 0
  std::function<void(float* data, std::size_t count)> all_reduce_sum;  // host memory, in place
  std::function<void(const float* send, float* recv, std::size_t count)> reduce_scatter_sum;  // count per rank
  std::function<void(double* data, int count)> all_reduce_max;
  std::function<void(const void* send, void* recv, std::size_t bytes)> all_to_all;  // bytes per rank, host memory
  std::function<void(const void* send, void* recv, std::size_t bytes)> all_gather;
  // Point to point, all posted together: (buffer, bytes, peer) to send and to receive.
  std::function<void(const std::vector<std::tuple<void*, std::size_t, int>>& sends, const std::vector<std::tuple<void*, std::size_t, int>>& recvs)>
      send_recv;
  // The ranks with this rank's color, ordered by key (collective over these ranks): the same
  // operations within that group; nullptr for color < 0.
  std::function<std::shared_ptr<Sharding>(int color, int key)> split;
};

struct PlannerOptions {
  std::string profile_dir;
  std::string scenario;
  std::string layout_overrides;
  int nodes = 0;
  std::vector<int> nodes_list;
  std::string mode = "symmetric";
  bool json = false;
  std::string trace;
  std::string trace_gpus;  // simulate: the GPUs whose tasks the trace keeps ("0-7,512")
  bool trace_gpus_given = false;  // --trace-gpus was given (else the trace keeps every GPU simulated)
  int top = 0;
  int threads = 0;
  std::string json_out;  // validate: where to write the JSON record
  std::string hardware;  // validate: the profile to predict with instead of the scenario's (the GPU's own)
  std::string output;    // report: the HTML file
  double factor = 2;     // what-if: how many times faster (and slower) each part is made
  bool search = false;   // what-if: search the space again with each part changed
  Sharding sharding;
};

// Each returns the process exit status; input errors are thrown as InputError.
int run_simulate(const PlannerOptions& o, std::ostream& out);
int run_sweep(const PlannerOptions& o, std::ostream& out);
int run_search(const PlannerOptions& o, std::ostream& out, std::ostream& progress);
// The scenario on each hardware option of its `compare` block (hardware_compare.h).
int run_compare(const PlannerOptions& o, std::ostream& out);
int run_report(const PlannerOptions& o);
// A layout the memory model puts out of memory is exported with a warning on `warnings` too.
int run_export(const PlannerOptions& o, std::ostream& out, std::ostream& warnings);
// The layout's step with each part of the hardware faster and slower (what_if.h).
int run_what_if(const PlannerOptions& o, std::ostream& out);
int run_validate(const PlannerOptions& o, std::ostream& out, std::ostream& progress);
// The distinct GEMM shapes the scenario's layouts run, as `calibrate --extra-shapes` reads them.
int run_gemm_shapes(const PlannerOptions& o, std::ostream& out);

}  // namespace trainsim
