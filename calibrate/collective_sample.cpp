#include "collective_sample.h"

#include "input_error.h"
#include "json_fields.h"

namespace trainsim::calib {

using nlohmann::json;

gpu::CollectiveSample read_collective_sample(const json& c, const std::string& at) {
  if (!c.is_object()) throw InputError(at, "expected a collective measurement (an object), found " + json_excerpt(c));
  auto field = [&](const char* key) -> const json& {
    if (!c.contains(key)) throw InputError(at + "." + key, "required field is missing");
    return c[key];
  };
  gpu::CollectiveSample s;
  s.collective = json_string(field("collective"), at + ".collective");
  if (s.collective != "all_reduce" && s.collective != "all_gather" && s.collective != "reduce_scatter" &&
      s.collective != "all_to_all" && s.collective != "send_recv")
    throw InputError(at + ".collective", "expected \"all_reduce\", \"all_gather\", \"reduce_scatter\", \"all_to_all\" or "
                                         "\"send_recv\", found \"" + s.collective + "\"");
  s.gpus = json_integer(field("gpus"), at + ".gpus", 1, 1 << 20);
  s.bytes = json_positive(field("bytes"), at + ".bytes");
  s.time_us = json_positive(field("time_us"), at + ".time_us");
  s.algbw_GBps = json_number(field("algbw_GBps"), at + ".algbw_GBps", 0.0);
  s.busbw_GBps = json_number(field("busbw_GBps"), at + ".busbw_GBps", 0.0);
  s.wrong = json_integer(field("wrong"), at + ".wrong", 0);
  return s;
}

}  // namespace trainsim::calib
