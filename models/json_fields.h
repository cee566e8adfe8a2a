#pragma once
// Strict reading of one JSON object: every key read is checked for type and range, and finish()
// rejects any key that was never asked for, suggesting the closest known key. Errors name the JSON
// path (`cluster.network.nic_Gbps`), what was expected and what was found.
#include <exception>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace trainsim {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& obj, std::string path);

  bool has(const std::string& key);
  // The raw value, or nullptr when absent. Marks the key as known.
  const nlohmann::json* find(const std::string& key);
  const nlohmann::json& required(const std::string& key);

  double number(const std::string& key, std::optional<double> fallback = std::nullopt,
                double min = -1e300, double max = 1e300);
  // An optional amount (a price, a budget, a rate): 0 when the key is absent, else a number in
  // (0, max]. An explicit 0 is an error, not "none": leaving the key out says that.
  double positive(const std::string& key, double max);
  int integer(const std::string& key, std::optional<int> fallback = std::nullopt, int min = -2147483647,
              int max = 2147483647);
  std::string string(const std::string& key, std::optional<std::string> fallback = std::nullopt);
  bool boolean(const std::string& key, std::optional<bool> fallback = std::nullopt);
  JsonFields object(const std::string& key);

  std::string path(const std::string& key) const;
  const std::string& path() const { return path_; }
  // Throws InputError for the first key present in the object that no call asked for.
  void finish() const;

 private:
  const nlohmann::json& obj_;
  std::string path_;
  std::vector<std::string> known_;
};

// Helpers for values that are not object members (array elements, union types).
std::string json_type_name(const nlohmann::json& v);
std::string json_excerpt(const nlohmann::json& v);
// nlohmann::json's message without its "[json.exception.type_error.302] " tag: what a user of the
// file needs ("type must be number, but is string"), not the library's catalogue number.
std::string json_error_text(const std::exception& e);
double json_number(const nlohmann::json& v, const std::string& path, double min = -1e300, double max = 1e300);
// A measured amount (a time, a size in bytes, a rate): a finite number above zero.
double json_positive(const nlohmann::json& v, const std::string& path);
int json_integer(const nlohmann::json& v, const std::string& path, int min = -2147483647, int max = 2147483647);
std::string json_string(const nlohmann::json& v, const std::string& path);
// Closest candidate by edit distance, or "" when none is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace trainsim
