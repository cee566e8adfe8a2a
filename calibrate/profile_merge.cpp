#include "profile_merge.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "attention_table.h"
#include "collective_sample.h"
#include "input_error.h"
#include "json_fields.h"
#include "kernel_table.h"
#include "profile_writer.h"

namespace trainsim::calib {

using json = nlohmann::json;

namespace {

// Each record of `arr` given to `read` with its path (`measurements.bandwidth[3]`); a record that
// lacks a field or holds the wrong type is an InputError naming it.
template <class Read>
void each_record(const json& arr, const std::string& path, Read read) {
  if (!arr.is_array()) throw InputError(path, "expected an array, found " + json_excerpt(arr));
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    try {
      read(arr[i], at);
    } catch (const json::exception& e) {
      throw InputError(at, json_error_text(e));
    }
  }
}

// A record's measured amount (json_positive), named by its path.
double positive(const json& record, const char* key, const std::string& at) {
  if (!record.contains(key)) throw InputError(at + "." + key, "required field is missing");
  return json_positive(record[key], at + "." + key);
}

const json& member(const json& obj, const char* key, const std::string& path) {
  if (!obj.is_object() || !obj.contains(key)) throw InputError(path.empty() ? key : path + "." + key, "required record is missing");
  return obj.at(key);
}

}  // namespace

gpu::Measurements single_gpu_measurements(const json& p) {
  gpu::Measurements m;
  const json& prov = member(p, "provenance", "");
  try {
    m.device.name = prov.value("device", std::string());
    m.device.count = prov.value("device_count", 1);
    m.device.driver = prov.value("driver", std::string());
    m.device.cuda_runtime = prov.value("cuda", std::string());
    m.device.nccl = prov.value("nccl", std::string());
    m.device.uuids = prov.value("device_uuids", std::vector<std::string>());
  } catch (const json::exception& e) {
    throw InputError("provenance", json_error_text(e));
  }
  const json& gpu_block = member(p, "gpu", "");
  const json& raw = member(p, "measurements", "");
  try {
    m.device.memory_bytes = gpu_block.value("memory_bytes", 0.0);
    m.device.topology = raw.value("topology", std::string());
    m.launch_overhead_us = raw.value("launch_overhead_us", 0.0);
    m.context_bytes = raw.value("context_bytes", -1.0);
    m.gemm_check_rel_error = raw.value("gemm_check_rel_error", -1.0);
  } catch (const json::exception& e) {
    throw InputError("measurements", json_error_text(e));
  }
  // GEMMs: the profile's table (m, n, k, TFLOP/s) per data type.
  const json& table = member(gpu_block, "gemm_tflops", "gpu");
  if (!table.is_object()) throw InputError("gpu.gemm_tflops", "expected an object, found " + json_excerpt(table));
  for (const auto& [dtype, rows] : table.items()) {
    if (dtype == "columns") continue;
    each_record(rows, "gpu.gemm_tflops." + dtype, [&, dtype = dtype](const json& r, const std::string& at) {
      gpu::GemmSample s;
      s.dtype = dtype;
      if (!r.is_array() || r.size() != 4) throw InputError(at, "expected [m, n, k, TFLOP/s], found " + json_excerpt(r));
      s.m = json_integer(r[0], at + "[0]", 1), s.n = json_integer(r[1], at + "[1]", 1), s.k = json_integer(r[2], at + "[2]", 1);
      s.tflops = json_number(r[3], at + "[3]", 1e-3);  // the profile loader's least rate (models/hardware_profile.cpp)
      s.time_us = 2.0 * s.m * s.n * static_cast<double>(s.k) / (s.tflops * 1e6);
      m.gemm.push_back(s);
    });
  }
  each_record(raw.value("bandwidth", json::array()), "measurements.bandwidth", [&](const json& b, const std::string& at) {
    if (b.value("src", -1) < 0)
      m.bandwidth.push_back({b.at("kernel").get<std::string>(), positive(b, "bytes", at), positive(b, "time_us", at),
                             positive(b, "GBps", at), -1, -1});
  });
  each_record(raw.value("attention", json::array()), "measurements.attention", [&](const json& a, const std::string& at) {
    // The first runs recorded neither the query heads per K/V head (1) nor dropout (on).
    json record = a;
    if (record.is_object()) {
      if (!record.contains("kv_group")) record["kv_group"] = 1;
      if (!record.contains("dropout")) record["dropout"] = true;
    }
    m.attention.push_back(read_attention_sample(record, at));
  });
  each_record(raw.value("collectives", json::array()), "measurements.collectives", [&](const json& c, const std::string& at) {
    const gpu::CollectiveSample sample = read_collective_sample(c, at);
    if (sample.gpus < 2) m.collectives.push_back(sample);
  });
  {
    const json kernels = raw.value("step_kernels", json::array());
    if (!kernels.is_array()) throw InputError("measurements.step_kernels", "expected an array, found " + json_excerpt(kernels));
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      json k = kernels[i];
      // The first runs recorded neither the sequence length (calibrate times every step kernel at
      // 2,048 tokens a sequence) nor the K/V heads and family (GPT's, with K/V heads as heads).
      if (k.is_object()) {
        if (!k.contains("seq")) k["seq"] = 2048;
        if (!k.contains("kv_heads")) k["kv_heads"] = 0;
        if (!k.contains("llama")) k["llama"] = false;
      }
      m.kernels.push_back(read_kernel_sample(k, "measurements.step_kernels[" + std::to_string(i) + "]"));
    }
  }
  each_record(raw.value("compression", json::array()), "measurements.compression", [&](const json& c, const std::string& at) {
    m.compression.push_back({c.at("kernel").get<std::string>(), positive(c, "bytes", at), positive(c, "time_us", at),
                             positive(c, "GBps", at), c.value("rel_error", 0.0)});
  });
  if (m.gemm.empty() && m.bandwidth.empty() && m.attention.empty() && m.kernels.empty() && m.compression.empty())
    throw InputError("measurements", "holds no measured sample (GEMMs, copies, attention, step kernels or compression)");
  return m;
}

double median_of_runs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// Samples of one kind from every run, grouped by what was measured (`key`), in the order they
// first appear from the last run backwards; `retime(sample, median time)` sets the merged time and
// what derives from it.
template <class Sample, class Key, class Time, class Retime>
std::vector<Sample> merge_samples(const std::vector<const std::vector<Sample>*>& runs, Key key, Time time, Retime retime) {
  using Base = decltype(key(std::declval<const Sample&>()));
  using K = decltype(std::tuple_cat(std::declval<Base>(), std::make_tuple(0)));
  std::vector<K> order;
  std::map<K, std::pair<Sample, std::vector<double>>> by_key;
  for (auto run = runs.rbegin(); run != runs.rend(); ++run) {
    std::map<Base, int> seen;  // a shape measured twice in one run (another layout) is its own sample
    for (const Sample& s : **run) {
      auto k = key(s);
      const int occurrence = seen[k]++;
      const K full = std::tuple_cat(k, std::make_tuple(occurrence));
      auto it = by_key.find(full);
      if (it == by_key.end()) {
        order.push_back(full);
        it = by_key.emplace(full, std::make_pair(s, std::vector<double>{})).first;
      }
      it->second.second.push_back(time(s));
    }
  }
  std::vector<Sample> out;
  for (const auto& k : order) {
    auto& [s, times] = by_key.at(k);
    Sample merged = s;
    retime(merged, median_of_runs(times));
    out.push_back(merged);
  }
  return out;
}

}  // namespace

json merge_profiles(const std::vector<json>& runs, const std::string& name, const std::string& command, const std::string& date) {
  std::vector<gpu::Measurements> ms;
  for (const json& p : runs) ms.push_back(single_gpu_measurements(p));
  auto all = [&](auto member) {
    std::vector<const std::remove_reference_t<decltype(ms[0].*member)>*> v;
    for (const auto& m : ms) v.push_back(&(m.*member));
    return v;
  };
  gpu::Measurements out = ms.back();
  // Every card the runs were measured on, in the order they first appear.
  out.device.uuids.clear();
  for (const auto& m : ms)
    for (const std::string& u : m.device.uuids)
      if (std::find(out.device.uuids.begin(), out.device.uuids.end(), u) == out.device.uuids.end()) out.device.uuids.push_back(u);
  out.gemm = merge_samples(
      all(&gpu::Measurements::gemm), [](const gpu::GemmSample& s) { return std::make_tuple(s.dtype, s.m, s.n, s.k); },
      [](const gpu::GemmSample& s) { return s.time_us; },
      [](gpu::GemmSample& s, double t) {
        s.time_us = t;
        s.tflops = 2.0 * s.m * s.n * static_cast<double>(s.k) / (t * 1e6);
      });
  out.bandwidth = merge_samples(
      all(&gpu::Measurements::bandwidth), [](const gpu::BandwidthSample& s) { return std::make_tuple(s.kernel, s.bytes); },
      [](const gpu::BandwidthSample& s) { return s.time_us; },
      [](gpu::BandwidthSample& s, double t) {
        s.time_us = t;
        s.GBps = s.bytes / (t * 1e3);
      });
  // Attention: forward and backward each take their own median.
  auto attention_key = [](const gpu::AttentionSample& s) { return std::make_tuple(s.batch, s.heads, s.seq, s.head_dim, s.kv_group, s.dropout); };
  const auto fwd = merge_samples(
      all(&gpu::Measurements::attention), attention_key, [](const gpu::AttentionSample& s) { return s.fwd_us; },
      [](gpu::AttentionSample& s, double t) {
        s.fwd_tflops *= s.fwd_us / t;
        s.fwd_us = t;
      });
  const auto bwd = merge_samples(
      all(&gpu::Measurements::attention), attention_key, [](const gpu::AttentionSample& s) { return s.bwd_us; },
      [](gpu::AttentionSample& s, double t) {
        s.bwd_tflops *= s.bwd_us / t;
        s.bwd_us = t;
      });
  out.attention = fwd;
  for (std::size_t i = 0; i < out.attention.size(); ++i) {
    out.attention[i].bwd_us = bwd[i].bwd_us;
    out.attention[i].bwd_tflops = bwd[i].bwd_tflops;
  }
  out.collectives = merge_samples(
      all(&gpu::Measurements::collectives),
      [](const gpu::CollectiveSample& s) { return std::make_tuple(s.collective, s.gpus, s.bytes); },
      [](const gpu::CollectiveSample& s) { return s.time_us; },
      [](gpu::CollectiveSample& s, double t) {
        s.algbw_GBps *= s.time_us / t;
        s.busbw_GBps *= s.time_us / t;
        s.time_us = t;
      });
  out.kernels = merge_samples(
      all(&gpu::Measurements::kernels),
      [](const gpu::KernelSample& s) { return std::make_tuple(s.kernel, s.tokens, s.hidden, s.ffn, s.vocab, s.heads, s.kv_heads, s.llama); },
      [](const gpu::KernelSample& s) { return s.time_us; }, [](gpu::KernelSample& s, double t) { s.time_us = t; });
  out.compression = merge_samples(
      all(&gpu::Measurements::compression), [](const gpu::CompressionSample& s) { return std::make_tuple(s.kernel, s.bytes); },
      [](const gpu::CompressionSample& s) { return s.time_us; },
      [](gpu::CompressionSample& s, double t) {
        s.GBps = s.bytes / (t * 1e3);
        s.time_us = t;
      });
  std::vector<double> launch;
  for (const auto& m : ms) launch.push_back(m.launch_overhead_us);
  out.launch_overhead_us = median_of_runs(launch);
  std::vector<double> context;
  for (const auto& m : ms)
    if (m.context_bytes > 0) context.push_back(m.context_bytes);
  if (!context.empty()) out.context_bytes = median_of_runs(context);  // communicators: the last run's profile keeps them
  for (const auto& m : ms) out.gemm_check_rel_error = std::max(out.gemm_check_rel_error, m.gemm_check_rel_error);
  out.interference_slowdown = -1;  // measured with several GPUs only: the last run's profile keeps it
  out.p2p_interference_slowdown = -1;
  out.notes.push_back("merged: each sample is the median of its times over " + std::to_string(runs.size()) + " calibration runs");
  json p = make_profile(out, runs.back(), name, command, date);
  json sources = json::array();
  for (const json& r : runs) sources.push_back(r.at("provenance"));
  p["provenance"]["merged_from"] = sources;
  p["provenance"]["rule"] = "per-sample median of the runs' times";
  p["gpu"]["provenance"] = p["provenance"];
  return p;
}

}  // namespace trainsim::calib
