#pragma once
// Reads nccl-tests results: the text tables all_reduce_perf & co. print, and the JSON file written
// with -J (format version 2). Out-of-place columns are used. Throws InputError naming the file and
// line on malformed input.
#include <string>
#include <vector>

#include "link_table.h"

namespace trainsim::calib {

std::vector<LinkTable> parse_nccl_tests_text(const std::string& text, const std::string& file);
std::vector<LinkTable> parse_nccl_tests_json(const std::string& text, const std::string& file);
// Chooses the parser by content (a JSON document starts with '{').
std::vector<LinkTable> import_nccl_tests_file(const std::string& path);

// "./build/all_reduce_perf" -> "all_reduce"; "alltoall_perf" -> "all_to_all"; "sendrecv" -> "send_recv".
std::string collective_from_program(const std::string& program);

}  // namespace trainsim::calib
