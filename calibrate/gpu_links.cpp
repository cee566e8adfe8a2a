#include "gpu_links.h"

#include <array>
#include <cstdio>
#include <memory>
#include <cctype>
#include <sstream>
#include <vector>

namespace trainsim::calib {

namespace {

// Drops terminal colour codes (ESC [ digits ; ... m), which nvidia-smi prints on a terminal.
std::string strip_escapes(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == ';')) ++j;
      if (j < s.size() && s[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool gpu_name(const std::string& tok, int* index) {
  if (tok.size() < 4 || tok.compare(0, 3, "GPU") != 0) return false;
  if (tok.find_first_not_of("0123456789", 3) != std::string::npos) return false;
  *index = std::stoi(tok.substr(3));
  return true;
}

}  // namespace

GpuLinks parse_topo_matrix(const std::string& text) {
  GpuLinks out;
  std::istringstream lines(strip_escapes(text));
  std::vector<int> columns;  // the GPU index of each leading header column
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> tok;
    for (std::string w; words >> w;) tok.push_back(w);
    if (tok.empty()) continue;
    int idx = 0;
    if (columns.empty()) {
      // The header: GPU0 GPU1 ... then NICs and affinities.
      for (const auto& t : tok) {
        if (!gpu_name(t, &idx)) break;
        columns.push_back(idx);
      }
      if (columns.size() < 2) columns.clear();
      continue;
    }
    if (!gpu_name(tok[0], &idx)) {
      if (tok[0] == "Legend:") break;
      continue;
    }
    for (std::size_t c = 0; c < columns.size() && c + 1 < tok.size(); ++c) {
      const int other = columns[c];
      if (other == idx || tok[c + 1] == "X") continue;
      out[{std::min(idx, other), std::max(idx, other)}] = tok[c + 1];
    }
  }
  return out;
}

GpuLinks read_gpu_links() {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen("nvidia-smi topo -m 2>/dev/null", "r"), pclose);
  if (!p) return {};
  std::string text;
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p.get())) > 0;) text.append(buf.data(), n);
  return parse_topo_matrix(text);
}

std::string describe_link(const std::string& code) {
  if (code.size() > 2 && code.compare(0, 2, "NV") == 0 && code.find_first_not_of("0123456789", 2) == std::string::npos)
    return "NVLink x" + code.substr(2);
  for (const char* p : {"PIX", "PXB", "PHB", "NODE", "SYS"})
    if (code == p) return "PCIe (" + code + ")";
  return code;
}

}  // namespace trainsim::calib
