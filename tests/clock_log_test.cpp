// nvidia-smi's clock and power log, read back and matched to windows of wall-clock time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "clock_log.h"
#include "input_error.h"

using namespace trainsim;
using namespace trainsim::calib;

namespace {

// `t` (seconds since the epoch) as nvidia-smi prints its timestamp: local time, milliseconds.
std::string smi_time(double t) {
  const std::time_t whole = static_cast<std::time_t>(std::floor(t));
  std::tm tm{};
  localtime_r(&whole, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d/%02d/%02d %02d:%02d:%02d.%03d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                tm.tm_sec, static_cast<int>(std::lround((t - static_cast<double>(whole)) * 1000)));
  return buf;
}

std::string write_log(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(ClockLog, SamplesInAWindowGiveTheirMedianClockAndPower) {
  // Samples every 100 ms from t0: 1980 MHz at 480 W for the first five, then 1605, 1590, 1620 MHz
  // at 690-700 W, one of them without a power reading; a last line cut short, as a log still being
  // written ends.
  const double t0 = 1764700000.0;
  std::string text = "timestamp, clocks.current.sm [MHz], power.draw [W]\n";
  for (int i = 0; i < 5; ++i) text += smi_time(t0 + 0.1 * i) + ", 1980 MHz, 480.00 W\n";
  text += smi_time(t0 + 0.5) + ", 1605 MHz, 691.50 W\n";
  text += smi_time(t0 + 0.6) + ", 1590 MHz, [N/A]\n";
  text += smi_time(t0 + 0.7) + ", 1620 MHz, 699.10 W\n";
  text += smi_time(t0 + 0.8) + ", 16";
  const auto log = read_clock_log(write_log("clocks.csv", text));
  ASSERT_EQ(log.size(), 8u);
  EXPECT_NEAR(log[5].wall_s, t0 + 0.5, 1e-3);  // local time read back as it was written
  EXPECT_TRUE(std::isnan(log[6].power_w));
  // The last three: median clock 1605 MHz; power, the mean of the two readings (an even count).
  const ClockStats hot = clock_stats(log, t0 + 0.45, t0 + 0.75);
  EXPECT_EQ(hot.samples, 3);
  EXPECT_DOUBLE_EQ(hot.sm_mhz, 1605);
  EXPECT_NEAR(hot.power_w, (691.5 + 699.1) / 2, 1e-9);
  const ClockStats cool = clock_stats(log, t0 - 1, t0 + 0.45);
  EXPECT_EQ(cool.samples, 5);
  EXPECT_DOUBLE_EQ(cool.sm_mhz, 1980);
  const ClockStats none = clock_stats(log, t0 + 5, t0 + 6);
  EXPECT_EQ(none.samples, 0);
  EXPECT_TRUE(std::isnan(none.sm_mhz));
  EXPECT_TRUE(std::isnan(hot.capped_fraction));  // nvidia-smi's log does not say
}

TEST(ClockLog, ALineThatIsNotASampleIsAnErrorNamingItsLine) {
  const std::string path = write_log("bad-clocks.csv", "timestamp, clocks.current.sm [MHz], power.draw [W]\n"
                                                        "2026/12/02 20:09:18.038, 1980 MHz, 480.00 W\n"
                                                        "2026/12/02 20:09:18.238, 1980 GHz, 480.00 W\n");
  try {
    read_clock_log(path);
    FAIL() << "a clock in GHz was read";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), path + ":3");
    EXPECT_NE(std::string(e.what()).find("1980 GHz"), std::string::npos);
  }
  EXPECT_THROW(read_clock_log(write_log("short.csv", "2026/12/02 20:09:18.038, 1980 MHz\n")), InputError);
  EXPECT_THROW(read_clock_log(write_log("stamp.csv", "2026-12-02 20:09:18, 1980 MHz, 480 W\n")), InputError);
  EXPECT_THROW(read_clock_log(testing::TempDir() + "no-such-log.csv"), InputError);
}

TEST(ClockLog, AHeaderNamesTheColumnsWithTheInstantaneousPowerAndThePowerCap) {
  // nvidia-smi queried for more than the three columns: the header says where each is; columns
  // it does not know (temperature) are skipped. Four samples: the instantaneous power is their mean
  // (the energy over the window), the 1 s mean's the median; two of the three that say were capped.
  const std::string text =
      "timestamp, clocks.current.sm [MHz], power.draw [W], power.draw.instant [W], temperature.gpu, clocks_event_reasons.sw_power_cap\n"
      "2026/12/06 13:57:21.148, 1980 MHz, 483.00 W, 572.00 W, 46, Not Active\n"
      "2026/12/06 13:57:21.254, 1980 MHz, 490.00 W, 580.00 W, 46, Active\n"
      "2026/12/06 13:57:21.354, 1965 MHz, 500.00 W, 590.00 W, 47, Active\n"
      "2026/12/06 13:57:21.454, 1965 MHz, 510.00 W, 560.00 W, 47, [N/A]\n";
  const auto log = read_clock_log(write_log("instant.csv", text));
  ASSERT_EQ(log.size(), 4u);
  EXPECT_DOUBLE_EQ(log[0].power_w, 483);
  EXPECT_DOUBLE_EQ(log[0].power_instant_w, 572);
  EXPECT_DOUBLE_EQ(log[0].power_capped, 0);
  EXPECT_DOUBLE_EQ(log[1].power_capped, 1);
  EXPECT_TRUE(std::isnan(log[3].power_capped));
  const ClockStats s = clock_stats(log, log.front().wall_s, log.back().wall_s);
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.power_instant_w, (572.0 + 580.0 + 590.0 + 560.0) / 4);
  EXPECT_DOUBLE_EQ(s.power_w, (490.0 + 500.0) / 2);
  EXPECT_DOUBLE_EQ(s.capped_fraction, 2.0 / 3.0);
  // Without the column there is no instantaneous reading: NaN, not 0.
  const auto plain = read_clock_log(write_log("plain.csv", "timestamp, clocks.current.sm [MHz], power.draw [W]\n"
                                                            "2026/12/06 13:57:21.148, 1980 MHz, 483.00 W\n"));
  EXPECT_TRUE(std::isnan(clock_stats(plain, plain[0].wall_s, plain[0].wall_s).power_instant_w));
  // A header without the power, and a sample with a column short, name their lines.
  for (const auto& [name, body, line] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"no-power.csv", "timestamp, clocks.current.sm [MHz], temperature.gpu\n2026/12/06 13:57:21.148, 1980 MHz, 46\n", ":1"},
           {"short-row.csv",
            "timestamp, clocks.current.sm [MHz], power.draw [W], power.draw.instant [W]\n2026/12/06 13:57:21.148, 1980 MHz, 483.00 W\n",
            ":2"},
           {"bad-cap.csv",
            "timestamp, clocks.sm [MHz], power.draw [W], clocks_event_reasons.sw_power_cap\n2026/12/06 13:57:21.148, 1980 MHz, 483 W, maybe\n",
            ":2"}}) {
    const std::string path = write_log(name, body);
    try {
      read_clock_log(path);
      ADD_FAILURE() << name << " was read";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), path + line) << name;
    }
  }
}

TEST(ClockLog, TheCappedFractionCountsOnlySamplesThatSay) {
  // An nvidia-smi log does not say whether the power cap held the clock; NVML's readings do. Of
  // four samples in the window, three say: two capped, one not, so 2/3; the fifth is outside.
  std::vector<ClockSample> log(5);
  const double capped[] = {1, 1, 0, std::numeric_limits<double>::quiet_NaN(), 1};
  for (int i = 0; i < 5; ++i) {
    log[i].wall_s = 100 + i;
    log[i].sm_mhz = 1600 + 10 * i;
    log[i].power_w = 690;
    log[i].power_capped = capped[i];
  }
  const ClockStats s = clock_stats(log, 100, 103);
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.capped_fraction, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.sm_mhz, 1615);  // the mean of the middle two of 1600, 1610, 1620, 1630
  log[0].power_capped = log[1].power_capped = log[2].power_capped = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(clock_stats(log, 100, 103).capped_fraction));
}
