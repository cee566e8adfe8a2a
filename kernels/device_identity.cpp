#include "device_identity.h"

namespace trainsim::gpu {

std::string format_gpu_uuid(const unsigned char (&bytes)[16]) {
  static const char hex[] = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[bytes[i] >> 4];
    s += hex[bytes[i] & 15];
  }
  return s;
}

}  // namespace trainsim::gpu
