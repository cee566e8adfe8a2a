#pragma once
#include <string>

namespace trainsim {

enum class Recompute { none, selective, full };
enum class Schedule { gpipe, one_f_one_b, interleaved };

// Gradient compression applied to the data-parallel gradient exchange.
struct Compression {
  enum class Kind { none, fp16, int8, topk, powersgd };
  Kind kind = Kind::none;
  double topk_fraction = 0.0;  // topk: fraction of elements kept
  int powersgd_rank = 0;       // powersgd: rank of the low-rank factors
  bool operator==(const Compression&) const = default;
};

// One parallel layout of a training step. tp * pp * dp GPUs; vpp virtual stages per pipeline rank.
struct Layout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int vpp = 1;
  int micro_batch = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  int zero = 0;  // 0: plain DDP, 1: optimizer states, 2: + gradients, 3: + parameters (FSDP)
  double bucket_MB = 25.0;
  Compression compression;
  Schedule schedule = Schedule::one_f_one_b;
  bool operator==(const Layout&) const = default;

  int gpus() const { return tp * pp * dp; }
};

Recompute parse_recompute(const std::string& s, const std::string& where);
Schedule parse_schedule(const std::string& s, const std::string& where);
Compression parse_compression(const std::string& s, const std::string& where);
const char* to_string(Recompute r);
const char* to_string(Schedule s);
std::string to_string(const Compression& c);
// "tp=8,pp=8,dp=16,vpp=3,mb=1,sp,recompute=selective,zero=1,bucket=25MB,compression=none,1f1b"
std::string describe(const Layout& l);
// "tp8 pp8 dp16 v3 mb1 sp selective z1 25MB" for tables.
std::string describe_short(const Layout& l);

}  // namespace trainsim
