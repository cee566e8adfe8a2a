#include "scenario.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "input_error.h"
#include "json_fields.h"
#include "layout_rules.h"
#include "model_presets.h"

namespace trainsim {

using nlohmann::json;

namespace {

// A DDP bucket's size, in the file and on the command line.
constexpr double kMinBucketMB = 0.001, kMaxBucketMB = 1e6;

std::string preset_list() {
  std::string s;
  for (const auto& n : model_preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

ModelConfig preset_or_throw(const std::string& name, const std::string& path) {
  if (auto m = find_model_preset(name)) return *m;
  std::string msg = "unknown model preset \"" + name + "\"";
  const std::string near = closest_match(name, model_preset_names());
  if (!near.empty()) msg += " (did you mean \"" + near + "\"?)";
  throw InputError(path, msg + "; presets: " + preset_list());
}

ModelConfig read_model(const json& v, const std::string& path) {
  if (v.is_string()) return preset_or_throw(v.get<std::string>(), path);
  JsonFields f(v, path);
  ModelConfig m;
  const bool from_preset = f.has("preset");
  if (from_preset) {
    m = preset_or_throw(f.string("preset"), f.path("preset"));
  } else {
    const std::string fam = f.string("family");
    if (fam != "gpt" && fam != "llama")
      throw InputError(f.path("family"), "expected \"gpt\" or \"llama\", found \"" + fam + "\"");
    m.family = fam == "gpt" ? Family::gpt : Family::llama;
    m.name = f.string("name", "custom");
  }
  auto opt_int = [&](const char* key, int& field) {
    if (from_preset) field = f.integer(key, field, 1, 1 << 24);
    else field = f.integer(key, std::nullopt, 1, 1 << 24);
  };
  if (from_preset && f.has("family")) throw InputError(f.path("family"), "a preset's family cannot be changed");
  if (from_preset) m.name = f.string("name", m.name);
  opt_int("layers", m.layers);
  opt_int("hidden", m.hidden);
  opt_int("heads", m.heads);
  if (!from_preset) m.kv_heads = m.heads;
  m.kv_heads = f.integer("kv_heads", m.kv_heads, 1, 1 << 24);
  opt_int("ffn_hidden", m.ffn_hidden);
  opt_int("vocab", m.vocab);
  opt_int("seq_len", m.seq_len);
  m.tied_embeddings = f.boolean("tied_embeddings", from_preset ? m.tied_embeddings : (m.family == Family::gpt));
  m.vocab_divisible_by = f.integer("vocab_divisible_by", 0, 1, 1 << 16);
  f.finish();
  validate_model(m, path);
  return m;
}

template <class T, class Fn>
std::vector<T> read_list(const json& v, const std::string& path, Fn one) {
  std::vector<T> out;
  if (v.is_array()) {
    if (v.empty()) throw InputError(path, "expected a non-empty list");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      out.push_back(one(v[i], at));
      // A value listed twice would be searched, swept or validated twice over.
      for (std::size_t j = 0; j < i; ++j)
        if (v[j] == v[i]) throw InputError(at, "repeats " + path + "[" + std::to_string(j) + "] (" + v[i].dump() + ")");
    }
  } else {
    out.push_back(one(v, path));
  }
  return out;
}

bool read_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) throw InputError(path, "expected true or false, found " + json_excerpt(v));
  return v.get<bool>();
}

Layout read_layout(JsonFields& f, bool* dp_given) {
  Layout l;
  l.tp = f.integer("tp", 1, 1, 1 << 16);
  l.pp = f.integer("pp", 1, 1, 1 << 16);
  *dp_given = f.has("dp");
  l.dp = f.integer("dp", 1, 1, 1 << 24);
  l.vpp = f.integer("vpp", 1, 1, 64);
  l.micro_batch = f.integer("micro_batch", 1, 1, 1 << 16);
  l.sequence_parallel = f.boolean("sequence_parallel", false);
  l.recompute = parse_recompute(f.string("recompute", "none"), f.path("recompute"));
  l.zero = f.integer("zero", 0, 0, 3);
  l.bucket_MB = f.number("bucket_MB", 25.0, kMinBucketMB, kMaxBucketMB);
  l.compression = parse_compression(f.string("compression", "none"), f.path("compression"));
  l.schedule = parse_schedule(f.string("schedule", l.vpp > 1 ? "interleaved" : "1f1b"), f.path("schedule"));
  f.finish();
  return l;
}

void read_search(JsonFields& f, SearchSpace& s) {
  auto ints = [&](const char* key, int lo, int hi) {
    std::vector<int> out;
    if (const json* v = f.find(key))
      out = read_list<int>(*v, f.path(key), [&](const json& x, const std::string& p) { return json_integer(x, p, lo, hi); });
    return out;
  };
  s.tp = ints("tp", 1, 1 << 16);
  if (const json* v = f.find("pp")) {
    if (v->is_string()) {
      if (v->get<std::string>() != "auto")
        throw InputError(f.path("pp"), "expected a list of integers or \"auto\", found " + json_excerpt(*v));
      s.pp_auto = true;
    } else {
      s.pp = read_list<int>(*v, f.path("pp"), [&](const json& x, const std::string& p) { return json_integer(x, p, 1, 1 << 16); });
    }
  }
  s.vpp = ints("vpp", 1, 64);
  s.micro_batch = ints("micro_batch", 1, 1 << 16);
  s.zero = ints("zero", 0, 3);
  s.nodes = ints("nodes", 1, 1 << 20);
  if (const json* v = f.find("sequence_parallel")) s.sequence_parallel = read_list<bool>(*v, f.path("sequence_parallel"), read_bool);
  if (const json* v = f.find("recompute"))
    s.recompute = read_list<Recompute>(*v, f.path("recompute"), [](const json& x, const std::string& p) { return parse_recompute(json_string(x, p), p); });
  if (const json* v = f.find("bucket_MB"))
    s.bucket_MB = read_list<double>(*v, f.path("bucket_MB"), [](const json& x, const std::string& p) { return json_number(x, p, kMinBucketMB, kMaxBucketMB); });
  if (const json* v = f.find("compression"))
    s.compression = read_list<Compression>(*v, f.path("compression"), [](const json& x, const std::string& p) { return parse_compression(json_string(x, p), p); });
  if (const json* v = f.find("schedule"))
    s.schedule = read_list<Schedule>(*v, f.path("schedule"), [](const json& x, const std::string& p) { return parse_schedule(json_string(x, p), p); });
  s.objective = f.string("objective", "tokens_per_s");
  if (s.objective != "tokens_per_s" && s.objective != "time_to_train" && s.objective != "cost")
    throw InputError(f.path("objective"), "expected \"tokens_per_s\", \"time_to_train\" or \"cost\", found \"" + s.objective + "\"");
  s.top = f.integer("top", 10, 1, 100000);
  s.allow_tp_across_nodes = f.boolean("allow_tp_across_nodes", false);
  f.finish();
}

// A `network` object's overrides of `n` (the hardware profile's defaults).
void read_network(JsonFields& nw, NetworkSpec& n) {
  n.nics_per_node = nw.integer("nics_per_node", n.nics_per_node, 1, 1024);
  n.nic_Gbps = nw.number("nic_Gbps", n.nic_Gbps, 0.1, 1e5);
  n.fabric = nw.string("fabric", n.fabric);
  if (n.fabric != "single-switch" && n.fabric != "fat-tree" && n.fabric != "rail-optimized")
    throw InputError(nw.path("fabric"), "expected \"single-switch\", \"fat-tree\" or \"rail-optimized\", found \"" + n.fabric + "\"");
  n.oversubscription = nw.number("oversubscription", 1.0, 1.0, 64.0);
  if (n.fabric == "single-switch" && n.oversubscription != 1.0)
    throw InputError(nw.path("oversubscription"), "a single switch has no uplinks to oversubscribe: set fabric to \"fat-tree\" or "
                                                  "\"rail-optimized\", or leave oversubscription at 1");
  n.nics_per_leaf_given = nw.has("nics_per_leaf");
  n.nics_per_leaf = nw.integer("nics_per_leaf", n.nics_per_leaf, 1, 1 << 16);
  if (n.fabric == "single-switch" && n.nics_per_leaf_given)
    throw InputError(nw.path("nics_per_leaf"), "a single switch takes every NIC and has no leaf switches: set fabric to \"fat-tree\" or "
                                               "\"rail-optimized\", or leave nics_per_leaf out");
  n.latency_us = nw.number("latency_us", n.latency_us, 0.0, 1e5);
  n.efficiency = nw.number("efficiency", n.efficiency, 0.01, 1.0);
  n.allreduce_algorithm = nw.string("allreduce_algorithm", n.allreduce_algorithm);
  if (n.allreduce_algorithm != "auto" && n.allreduce_algorithm != "ring" && n.allreduce_algorithm != "tree")
    throw InputError(nw.path("allreduce_algorithm"), "expected \"auto\", \"ring\" or \"tree\", found \"" + n.allreduce_algorithm + "\"");
  n.nvls = nw.boolean("nvls", n.nvls);
  if (n.nvls && n.allreduce_algorithm != "auto")
    throw InputError(nw.path("nvls"), "NVLS is one of the algorithms NCCL picks among, and allreduce_algorithm \"" + n.allreduce_algorithm +
                                          "\" leaves it out: set allreduce_algorithm to \"auto\" or nvls to false");
  nw.finish();
}

std::vector<int> read_node_counts(const json& v, const std::string& path) {
  return read_list<int>(v, path, [](const json& x, const std::string& p) { return json_integer(x, p, 1, 1 << 20); });
}

Scenario parse_document(const json& doc, const std::string& file, const std::string& profile_dir);

// The `compare` block: a list of hardware options, each the scenario with its own "hardware" and,
// where the entry gives them, its own "nodes", "gpus_per_node", "network" keys, "precision" and
// "gpu_hour_usd".
// With a `search` block the comparison ranks the search space, so the alternatives leave out the
// scenario's `layout` (a layout for one machine's node shape need not fit another's).
std::vector<Alternative> read_compare(const json& doc, const json& block, const std::string& profile_dir) {
  if (!block.is_array() || block.empty())
    throw InputError("compare", "expected a non-empty list of {\"hardware\": profile, ...}, found " + json_excerpt(block));
  if (block.size() > 32) throw InputError("compare", "at most 32 alternatives, found " + std::to_string(block.size()));
  std::vector<Alternative> out;
  for (std::size_t i = 0; i < block.size(); ++i) {
    const std::string at = "compare[" + std::to_string(i) + "]";
    JsonFields ef(block[i], at);
    Alternative a;
    const std::string hw = ef.string("hardware");
    a.name = ef.string("name", hw);
    json v = doc;
    v.erase("compare");
    v["hardware"] = hw;
    if (ef.has("gpu_hour_usd")) v["cost"]["gpu_hour_usd"] = ef.positive("gpu_hour_usd", 1e6);
    if (ef.has("gpus_per_node")) v["cluster"]["gpus_per_node"] = ef.integer("gpus_per_node", std::nullopt, 1, 1024);
    if (ef.has("precision")) {
      const std::string p = ef.string("precision");
      (void)parse_precision(p, ef.path("precision"));
      v["training"]["precision"] = p;
    }
    if (const json* nodes = ef.find("nodes")) {
      v["cluster"]["nodes"] = read_node_counts(*nodes, ef.path("nodes"));
      if (v.contains("search") && v["search"].is_object() && v["search"].contains("nodes")) v["search"]["nodes"] = v["cluster"]["nodes"];
    }
    if (ef.has("network")) {
      JsonFields nw = ef.object("network");
      NetworkSpec checked;
      read_network(nw, checked);
      for (const auto& [k, x] : ef.required("network").items()) v["cluster"]["network"][k] = x;
    }
    ef.finish();
    for (const Alternative& o : out)
      if (o.name == a.name) throw InputError(at, "a second alternative named \"" + a.name + "\" (give each a distinct \"name\")");
    if (v.contains("search")) v.erase("layout");
    a.scenario = std::make_shared<const Scenario>(parse_document(v, at + " (" + a.name + ")", profile_dir));
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& file, const std::string& profile_dir) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(file, "not valid JSON: " + json_error_text(e));
  }
  return parse_document(doc, file, profile_dir);
}

namespace {

Scenario parse_document(const json& doc, const std::string& file, const std::string& profile_dir) {
  Scenario s;
  s.file = file;
  try {
    JsonFields top(doc, "");
    s.name = top.string("name");
    s.description = top.string("description", "");
    s.model = read_model(top.required("model"), "model");

    JsonFields tr = top.object("training");
    s.training.global_batch = tr.integer("global_batch", std::nullopt, 1, 1 << 28);
    s.training.precision = parse_precision(tr.string("precision", "bf16"), tr.path("precision"));
    s.training.optimizer = tr.string("optimizer", "adam");
    if (s.training.optimizer != "adam" && s.training.optimizer != "adamw")
      throw InputError(tr.path("optimizer"), "expected \"adam\" or \"adamw\" (the memory model assumes mixed-precision Adam), found \"" +
                                                 s.training.optimizer + "\"");
    s.training.tokens_total = tr.positive("tokens_total", 1e18);
    s.training.deadline_days = tr.positive("deadline_days", 1e5);
    if (s.training.deadline_days > 0 && !(s.training.tokens_total > 0))
      throw InputError(tr.path("deadline_days"), "a deadline needs \"tokens_total\" (the tokens to train within it)");
    tr.finish();

    s.hardware_name = top.string("hardware");
    try {
      s.hardware = load_hardware_profile(s.hardware_name, profile_dir);
    } catch (const InputError& e) {
      if (e.where() == "hardware") throw;  // names the key already
      throw InputError("hardware", e.what());
    }

    JsonFields cl = top.object("cluster");
    s.cluster.nodes = read_node_counts(cl.required("nodes"), cl.path("nodes"));
    s.cluster.gpus_per_node = cl.integer("gpus_per_node", s.hardware.gpus_per_node, 1, 1024);
    NetworkSpec& n = s.cluster.network;
    n.nics_per_node = s.hardware.nics_per_node;
    n.nic_Gbps = s.hardware.nic_Gbps;
    n.latency_us = s.hardware.inter_latency_us;
    n.efficiency = s.hardware.nic_efficiency;
    if (cl.has("network")) {
      JsonFields nw = cl.object("network");
      read_network(nw, n);
      if (n.nics_per_leaf_given && n.fabric == "fat-tree" && n.nics_per_leaf < n.nics_per_node)
        throw InputError(nw.path("nics_per_leaf"), "a leaf switch of " + std::to_string(n.nics_per_leaf) + " NIC ports cannot take a node's " +
                                                       std::to_string(n.nics_per_node) + " NICs: give at least " + std::to_string(n.nics_per_node));
      if (n.nvls && s.hardware.intra_nvls_collectives.empty())
        throw InputError(nw.path("nvls"), "the hardware profile " + s.hardware.name +
                                              " has no collectives measured with NVLS on (intra_node.nvls_collectives) to price it by");
    }
    s.cluster.power_budget_kW = cl.positive("power_budget_kW", 1e9);
    if (s.cluster.power_budget_kW > 0 && !(s.hardware.node_max_kW > 0))
      throw InputError(cl.path("power_budget_kW"),
                       "a power budget needs the hardware profile's node power (power.node_max_kW), which " + s.hardware.name + " does not give");
    cl.finish();

    if (top.has("layout")) {
      JsonFields lf = top.object("layout");
      s.layout = read_layout(lf, &s.layout_dp_given);
      s.has_layout = true;
    }
    if (top.has("search")) {
      JsonFields sf = top.object("search");
      read_search(sf, s.search);
      s.has_search = true;
    }
    if (top.has("validate")) {
      JsonFields vf = top.object("validate");
      ValidateSpec& v = s.validate;
      if (const json* ms = vf.find("models"))
        v.models = read_list<ModelConfig>(*ms, vf.path("models"), [](const json& x, const std::string& p) { return read_model(x, p); });
      if (const json* mbs = vf.find("micro_batch"))
        v.micro_batch = read_list<int>(*mbs, vf.path("micro_batch"), [](const json& x, const std::string& p) { return json_integer(x, p, 1, 1024); });
      if (const json* rs = vf.find("recompute"))
        v.recompute = read_list<Recompute>(*rs, vf.path("recompute"), [](const json& x, const std::string& p) { return parse_recompute(json_string(x, p), p); });
      if (const json* cs = vf.find("compression")) {
        v.compression = read_list<Compression>(*cs, vf.path("compression"), [](const json& x, const std::string& p) { return parse_compression(json_string(x, p), p); });
        for (std::size_t i = 0; i < v.compression.size(); ++i)
          if (v.compression[i].kind == Compression::Kind::fp16 || v.compression[i].kind == Compression::Kind::powersgd)
            throw InputError(vf.path("compression") + "[" + std::to_string(i) + "]",
                             "the step runner implements \"none\", \"int8\" and \"topk:<fraction>\" gradient compression");
      }
      if (const json* zs = vf.find("zero"))
        v.zero = read_list<int>(*zs, vf.path("zero"), [](const json& x, const std::string& p) { return json_integer(x, p, 0, 3); });
      if (const json* bs = vf.find("bucket_MB"))
        v.bucket_MB = read_list<double>(*bs, vf.path("bucket_MB"), [](const json& x, const std::string& p) { return json_number(x, p, kMinBucketMB, kMaxBucketMB); });
      if (const json* ts = vf.find("tp"))
        v.tp = read_list<int>(*ts, vf.path("tp"), [](const json& x, const std::string& p) { return json_integer(x, p, 1, 1024); });
      if (const json* ps = vf.find("pp"))
        v.pp = read_list<int>(*ps, vf.path("pp"), [](const json& x, const std::string& p) { return json_integer(x, p, 1, 1024); });
      if (const json* vs = vf.find("vpp"))
        v.vpp = read_list<int>(*vs, vf.path("vpp"), [](const json& x, const std::string& p) { return json_integer(x, p, 1, 64); });
      v.rank_per_node = vf.boolean("rank_per_node", false);
      v.top = vf.integer("top", 3, 1, 1000);
      v.timed_steps = vf.integer("timed_steps", 5, 1, 1000);
      vf.finish();
      s.has_validate = true;
    }
    if (top.has("cost")) {
      JsonFields cf = top.object("cost");
      s.cost.gpu_hour_usd = cf.positive("gpu_hour_usd", 1e6);
      s.cost.budget_usd = cf.positive("budget_usd", 1e15);
      if (s.cost.budget_usd > 0 && !(s.cost.gpu_hour_usd > 0 && s.training.tokens_total > 0)) {
        const bool priced = s.cost.gpu_hour_usd > 0, tokens = s.training.tokens_total > 0;
        throw InputError(cf.path("budget_usd"), std::string("a budget is held against the cost to train, which needs ") +
                                                    (!priced ? "\"gpu_hour_usd\"" : "") + (!priced && !tokens ? " and " : "") +
                                                    (!tokens ? "training.tokens_total" : ""));
      }
      s.cost.energy_usd_per_kWh = cf.positive("energy_usd_per_kWh", 100.0);
      s.cost.pue = cf.number("pue", 1.0, 1.0, 5.0);
      if ((s.cost.energy_usd_per_kWh > 0 || cf.has("pue")) && !(s.hardware.node_max_kW > 0))
        throw InputError(cf.has("pue") ? cf.path("pue") : cf.path("energy_usd_per_kWh"),
                         "energy needs the hardware profile's node power (power.node_max_kW), which " + s.hardware.name + " does not give");
      if (s.cost.energy_usd_per_kWh > 0 && !(s.training.tokens_total > 0))
        throw InputError(cf.path("energy_usd_per_kWh"), "an energy price needs training.tokens_total (what is priced is the energy to train them)");
      cf.finish();
    }
    if (top.has("reliability")) {
      JsonFields rf = top.object("reliability");
      ReliabilitySpec& r = s.reliability;
      r.gpu_mtbf_hours = rf.positive("gpu_mtbf_hours", 1e9);
      r.node_mtbf_hours = rf.positive("node_mtbf_hours", 1e9);
      r.checkpoint_GBps = rf.number("checkpoint_GBps", std::nullopt, 1e-6, 1e9);
      r.restart_minutes = rf.number("restart_minutes", std::nullopt, 0.0, 1e6);
      const std::string mode = rf.string("checkpoint", std::string("sync"));
      if (mode != "sync" && mode != "async")
        throw InputError(rf.path("checkpoint"), "expected \"sync\" or \"async\", found \"" + mode + "\"");
      r.async_checkpoint = mode == "async";
      if (r.async_checkpoint && !(s.hardware.d2h_GBps > 0))
        throw InputError(rf.path("checkpoint"), "\"async\" needs the hardware profile's device-to-host rate (host_link.d2h_GBps)");
      if (r.gpu_mtbf_hours <= 0 && r.node_mtbf_hours <= 0)
        throw InputError(rf.path(), "needs \"gpu_mtbf_hours\" or \"node_mtbf_hours\" (hours between failures of one GPU or one node)");
      rf.finish();
      r.given = true;
    }
    if (top.has("data")) {
      JsonFields df = top.object("data");
      DataSpec& d = s.data;
      d.loader_tokens_per_s_per_node = df.positive("loader_tokens_per_s_per_node", 1e15);
      d.storage_GBps = df.positive("storage_GBps", 1e9);
      d.bytes_per_token = df.positive("bytes_per_token", 1e3);
      if (d.storage_GBps > 0 && d.bytes_per_token <= 0)
        throw InputError(df.path("bytes_per_token"), "required with \"storage_GBps\": bytes per token on storage (2 for uint16 ids, 4 for uint32)");
      if (d.loader_tokens_per_s_per_node <= 0 && d.storage_GBps <= 0)
        throw InputError(df.path(), "needs \"loader_tokens_per_s_per_node\" or \"storage_GBps\" (with \"bytes_per_token\")");
      df.finish();
      d.given = true;
    }
    if (top.has("stragglers")) {
      JsonFields sf = top.object("stragglers");
      StragglerSpec& st = s.stragglers;
      st.speed_stdev = sf.number("speed_stdev", 0.0, 0.0, 0.1);
      st.seed = static_cast<std::uint64_t>(sf.integer("seed", 1, 0));
      int max_gpus = 0;
      for (int n : s.cluster.nodes) max_gpus = std::max(max_gpus, n * s.cluster.gpus_per_node);
      for (int n : s.search.nodes) max_gpus = std::max(max_gpus, n * s.cluster.gpus_per_node);
      if (const json* gs = sf.find("gpus")) {
        const std::string path = sf.path("gpus");
        if (!gs->is_array() || gs->empty())
          throw InputError(path, "expected a non-empty list of {\"gpu\": index, \"speed\": fraction}, found " + json_excerpt(*gs));
        for (std::size_t i = 0; i < gs->size(); ++i) {
          JsonFields gf((*gs)[i], path + "[" + std::to_string(i) + "]");
          StragglerSpec::SlowGpu g;
          g.gpu = gf.integer("gpu", std::nullopt, 0);
          if (g.gpu >= max_gpus)
            throw InputError(gf.path("gpu"), "GPU " + std::to_string(g.gpu) + " is not in the largest cluster (" +
                                                 std::to_string(max_gpus) + " GPUs, numbered node x gpus_per_node + local index)");
          g.speed = gf.number("speed", std::nullopt, 1e-3, 1.0);
          gf.finish();
          for (const auto& o : st.gpus)
            if (o.gpu == g.gpu) throw InputError(gf.path("gpu"), "GPU " + std::to_string(g.gpu) + " is listed twice");
          st.gpus.push_back(g);
        }
      }
      if (const json* ns = sf.find("nics")) {
        const std::string path = sf.path("nics");
        if (!ns->is_array() || ns->empty())
          throw InputError(path, "expected a non-empty list of {\"node\": index, \"nic\": index, \"speed\": fraction}, found " + json_excerpt(*ns));
        const int max_nodes = max_gpus / s.cluster.gpus_per_node;
        for (std::size_t i = 0; i < ns->size(); ++i) {
          JsonFields nf((*ns)[i], path + "[" + std::to_string(i) + "]");
          StragglerSpec::SlowNic n;
          n.node = nf.integer("node", std::nullopt, 0);
          if (n.node >= max_nodes)
            throw InputError(nf.path("node"), "node " + std::to_string(n.node) + " is not in the largest cluster (" + std::to_string(max_nodes) + " nodes)");
          n.nic = nf.integer("nic", std::nullopt, 0);
          if (n.nic >= s.cluster.network.nics_per_node)
            throw InputError(nf.path("nic"), "a node has " + std::to_string(s.cluster.network.nics_per_node) + " NICs, numbered from 0");
          n.speed = nf.number("speed", std::nullopt, 1e-3, 1.0);
          nf.finish();
          for (const auto& o : st.nics)
            if (o.node == n.node && o.nic == n.nic)
              throw InputError(nf.path("nic"), "NIC " + std::to_string(n.nic) + " of node " + std::to_string(n.node) + " is listed twice");
          st.nics.push_back(n);
        }
      }
      sf.finish();
      if (st.gpus.empty() && st.nics.empty() && st.speed_stdev <= 0)
        throw InputError(sf.path(), "needs \"gpus\" (slow GPUs and their speeds), \"nics\" (slow NICs) or \"speed_stdev\" (the spread of GPU speeds)");
      st.given = true;
    }
    if (const json* c = top.find("compare")) s.compare = read_compare(doc, *c, profile_dir);
    top.finish();
    if (!s.has_layout && !s.has_search && !s.has_validate)
      throw InputError("layout", "a scenario needs a \"layout\" (simulate), a \"search\" (search) or a \"validate\" block");
    if (s.has_layout)
      for (int nodes : s.cluster.nodes) (void)resolve_layout(s, s.layout, s.layout_dp_given, nodes);
  } catch (const InputError& e) {
    throw InputError(file, e.what());
  }
  return s;
}

}  // namespace

Scenario load_scenario(const std::string& path, const std::string& profile_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "is a directory, not a scenario file");
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open scenario file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path, profile_dir);
}

Layout resolve_layout(const Scenario& s, Layout l, bool dp_given, int nodes) {
  const int gpus = nodes * s.cluster.gpus_per_node;
  if (!dp_given) {
    if (gpus % (l.tp * l.pp) != 0)
      throw InputError("layout", "tp x pp = " + std::to_string(l.tp * l.pp) + " does not divide the " +
                                     std::to_string(gpus) + " GPUs of " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes"));
    l.dp = gpus / (l.tp * l.pp);
  }
  const std::string why = layout_violation(s.model, l, s.training.global_batch, gpus, s.cluster.gpus_per_node,
                                           s.search.allow_tp_across_nodes);
  if (!why.empty()) throw InputError("layout", why + " (at " + std::to_string(nodes) + (nodes == 1 ? " node)" : " nodes)"));
  return l;
}

Layout apply_layout_overrides(Layout l, const std::string& overrides, bool* dp_given) {
  std::stringstream ss(overrides);
  std::string item;
  std::vector<std::string> seen;
  // Blanks around items, keys and values are not part of them ("tp=8, pp=2" as typed in a shell).
  auto trim = [](const std::string& s) {
    const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string where = "--layout " + item;
    if (eq == std::string::npos) throw InputError(where, "expected key=value");
    const std::string k = trim(item.substr(0, eq)), v = trim(item.substr(eq + 1));
    // A key given twice would leave one of the two silently unused.
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) throw InputError(where, "\"" + k + "\" is given twice");
    seen.push_back(k);
    auto as_int = [&](int lo, int hi) {
      try {
        std::size_t used = 0;
        const int x = std::stoi(v, &used);
        if (used != v.size() || x < lo || x > hi) throw std::invalid_argument("range");
        return x;
      } catch (const std::exception&) {
        throw InputError(where, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], found \"" + v + "\"");
      }
    };
    if (k == "tp") l.tp = as_int(1, 1 << 16);
    else if (k == "pp") l.pp = as_int(1, 1 << 16);
    else if (k == "dp") { l.dp = as_int(1, 1 << 24); *dp_given = true; }
    else if (k == "vpp") { l.vpp = as_int(1, 64); if (l.vpp > 1) l.schedule = Schedule::interleaved; }
    else if (k == "micro_batch") l.micro_batch = as_int(1, 1 << 16);
    else if (k == "zero") l.zero = as_int(0, 3);
    else if (k == "sequence_parallel") {
      if (v != "true" && v != "false") throw InputError(where, "expected true or false, found \"" + v + "\"");
      l.sequence_parallel = v == "true";
    } else if (k == "recompute") l.recompute = parse_recompute(v, where);
    else if (k == "bucket_MB") {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') throw InputError(where, "expected a number, found \"" + v + "\"");
      l.bucket_MB = json_number(x, where, kMinBucketMB, kMaxBucketMB);  // the scenario file's bounds
    } else if (k == "compression") l.compression = parse_compression(v, where);
    else if (k == "schedule") l.schedule = parse_schedule(v, where);
    else {
      const std::vector<std::string> keys = {"tp", "pp", "dp", "vpp", "micro_batch", "zero", "sequence_parallel",
                                             "recompute", "bucket_MB", "compression", "schedule"};
      std::string msg = "unknown layout key \"" + k + "\"";
      // The short names the result tables print a layout with ("v3 mb1 sp z1 100MB") are not
      // nearest their keys by spelling.
      static const std::vector<std::pair<std::string, std::string>> printed = {
          {"v", "vpp"}, {"mb", "micro_batch"}, {"sp", "sequence_parallel"}, {"z", "zero"}, {"bucket", "bucket_MB"}};
      std::string near = closest_match(k, keys);
      for (const auto& [shown, key] : printed)
        if (k == shown) near = key;
      if (!near.empty()) msg += " (did you mean \"" + near + "\"?)";
      throw InputError(where, msg);
    }
  }
  return l;
}

}  // namespace trainsim
