#include "json_fields.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "input_error.h"

namespace trainsim {

using nlohmann::json;

std::string json_type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string json_error_text(const std::exception& e) {
  std::string why = e.what();
  if (const auto end = why.find("] "); why.rfind("[json.exception.", 0) == 0 && end != std::string::npos) why.erase(0, end + 2);
  return why;
}

std::string json_excerpt(const json& v) {
  if (v.is_null()) return "null";
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return json_type_name(v) + " " + s;
}

double json_number(const json& v, const std::string& path, double min, double max) {
  if (!v.is_number()) throw InputError(path, "expected a number, found " + json_excerpt(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "expected a number in [%g, %g], found %g", min, max, d);
    throw InputError(path, buf);
  }
  return d;
}

double json_positive(const json& v, const std::string& path) {
  const double d = json_number(v, path, 0.0);
  if (!(d > 0)) throw InputError(path, "expected a positive number, found " + v.dump());
  return d;
}

int json_integer(const json& v, const std::string& path, int min, int max) {
  bool integral = v.is_number_integer() || v.is_number_unsigned();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    integral = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 2e9;
  }
  if (!integral) throw InputError(path, "expected an integer, found " + json_excerpt(v));
  const double d = v.get<double>();
  if (d < min || d > max)
    throw InputError(path, "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                               "], found " + v.dump());
  return static_cast<int>(d);
}

std::string json_string(const json& v, const std::string& path) {
  if (!v.is_string()) throw InputError(path, "expected a string, found " + json_excerpt(v));
  return v.get<std::string>();
}

static std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) { best_d = d; best = c; }
  }
  return best;
}

JsonFields::JsonFields(const json& obj, std::string path) : obj_(obj), path_(std::move(path)) {
  if (!obj_.is_object())
    throw InputError(path_.empty() ? "(top level)" : path_, "expected an object, found " + json_excerpt(obj_));
}

std::string JsonFields::path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

bool JsonFields::has(const std::string& key) {
  known_.push_back(key);
  return obj_.contains(key);
}

const json* JsonFields::find(const std::string& key) {
  known_.push_back(key);
  auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

const json& JsonFields::required(const std::string& key) {
  const json* v = find(key);
  if (!v) throw InputError(path(key), "required key is missing");
  return *v;
}

double JsonFields::number(const std::string& key, std::optional<double> fallback, double min, double max) {
  const json* v = find(key);
  if (!v) {
    if (!fallback) throw InputError(path(key), "required key is missing (expected a number)");
    return *fallback;
  }
  return json_number(*v, path(key), min, max);
}

double JsonFields::positive(const std::string& key, double max) {
  const json* v = find(key);
  if (!v) return 0.0;
  const double d = json_number(*v, path(key), -1e300, 1e300);
  if (!(d > 0) || d > max) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "expected a positive number up to %g (leave the key out for none), found %g", max, d);
    throw InputError(path(key), buf);
  }
  return d;
}

int JsonFields::integer(const std::string& key, std::optional<int> fallback, int min, int max) {
  const json* v = find(key);
  if (!v) {
    if (!fallback) throw InputError(path(key), "required key is missing (expected an integer)");
    return *fallback;
  }
  return json_integer(*v, path(key), min, max);
}

std::string JsonFields::string(const std::string& key, std::optional<std::string> fallback) {
  const json* v = find(key);
  if (!v) {
    if (!fallback) throw InputError(path(key), "required key is missing (expected a string)");
    return *fallback;
  }
  return json_string(*v, path(key));
}

bool JsonFields::boolean(const std::string& key, std::optional<bool> fallback) {
  const json* v = find(key);
  if (!v) {
    if (!fallback) throw InputError(path(key), "required key is missing (expected true or false)");
    return *fallback;
  }
  if (!v->is_boolean()) throw InputError(path(key), "expected true or false, found " + json_excerpt(*v));
  return v->get<bool>();
}

JsonFields JsonFields::object(const std::string& key) { return JsonFields(required(key), path(key)); }

void JsonFields::finish() const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    std::string msg = "unknown key \"" + it.key() + "\"";
    const std::string near = closest_match(it.key(), known_);
    if (!near.empty()) msg += " (did you mean \"" + near + "\"?)";
    throw InputError(path(it.key()), msg);
  }
}

}  // namespace trainsim
