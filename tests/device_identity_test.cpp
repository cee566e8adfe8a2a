// A GPU's UUID written as nvidia-smi -L writes it, so that records name the card they ran on.
#include <gtest/gtest.h>

#include "device_identity.h"

using trainsim::gpu::format_gpu_uuid;

TEST(DeviceIdentity, UuidBytesAreWrittenInOrderGroupedAsNvidiaSmiPrintsThem) {
  // Bytes 0x00, 0x01, ... 0x0f: each byte two lower-case hex digits, in order, dashes after the
  // 4th, 6th, 8th and 10th byte (8-4-4-4-12 digits).
  unsigned char counting[16];
  for (int i = 0; i < 16; ++i) counting[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(format_gpu_uuid(counting), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
  // High nibbles first: 0xfa is "fa", not "af"; every byte's value survives (no sign extension).
  unsigned char high[16];
  for (int i = 0; i < 16; ++i) high[i] = static_cast<unsigned char>(0xf0 + (15 - i));
  EXPECT_EQ(format_gpu_uuid(high), "GPU-fffefdfc-fbfa-f9f8-f7f6-f5f4f3f2f1f0");
}
