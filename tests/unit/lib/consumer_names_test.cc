// Names as consumers can keep them (FunctionNames): names that fit go out unchanged, longer ones
// as their stand-in of exactly the limit; one copy per name, readable to the consumer's length,
// from any thread.
#include "base/consumer_names.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace parcagpu {
namespace {

// Issue 42 item 3: the production agent keeps a PC function name to 127 bytes and a kernel name
// to 255. Longer names go out as stand-ins of exactly that length: the start of the name, '#',
// and the hash of the whole, so two names alike in their first bytes stay two, and the whole
// name is found in the cubin by its hash. Names that fit go out unchanged.
TEST(FunctionNames, NamesLongerThanTheConsumerKeepsGoOutAsStandIns) {
  const std::string common(200, 'n');
  const std::string a = "_ZN" + common + "1aEv", b = "_ZN" + common + "1bEv";
  for (size_t limit : {size_t{PARCAGPU_PC_FUNCTION_NAME_MAX}, size_t{PARCAGPU_KERNEL_NAME_MAX}}) {
    const std::string long_a = limit == PARCAGPU_KERNEL_NAME_MAX ? a + common : a;
    const std::string long_b = limit == PARCAGPU_KERNEL_NAME_MAX ? b + common : b;
    ASSERT_GT(long_a.size(), limit);
    FunctionNames names(limit, limit + 1);
    const char *sa = names.intern(long_a.c_str()), *sb = names.intern(long_b.c_str());
    ASSERT_EQ(std::strlen(sa), limit);
    ASSERT_EQ(std::strlen(sb), limit);
    EXPECT_STRNE(sa, sb) << "alike in their first " << limit << " bytes, still two names";
    const size_t keep = limit - PARCAGPU_NAME_HASH_SUFFIX_LEN;
    EXPECT_EQ(std::string(sa, keep), long_a.substr(0, keep));
    unsigned long long hash = 0;
    ASSERT_TRUE(parcagpu_name_is_stand_in(sa, std::strlen(sa), &hash)) << sa;
    EXPECT_EQ(hash, parcagpu_name_hash(long_a.c_str()));
    EXPECT_EQ(names.intern(long_a.c_str()), sa) << "one copy per name";
    EXPECT_EQ(names.fit(long_a.c_str()), sa);
    EXPECT_EQ(names.stand_ins(), 2u);
    // A name that fits: fit() hands it back as it is, intern() copies it unchanged.
    const std::string fits(limit, 'x');
    EXPECT_EQ(names.fit(fits.c_str()), fits.c_str());
    EXPECT_STREQ(names.intern(fits.c_str()), fits.c_str());
    EXPECT_FALSE(parcagpu_name_is_stand_in(fits.c_str(), fits.size(), &hash));
    EXPECT_EQ(names.fit(nullptr), nullptr);
  }
  // 64-bit FNV-1a, as a consumer recomputes it.
  EXPECT_EQ(parcagpu_name_hash(""), 14695981039346656037ull);
  EXPECT_EQ(parcagpu_name_hash("a"), 0xaf63dc4c8601ec8cull);
}

TEST(FunctionNames, OneCopyPerNameReadableToTheConsumersLength) {
  FunctionNames names(8, 32);
  std::string name = "_Z1kPf";
  const char *copy = names.intern(name.c_str());
  EXPECT_NE(copy, name.c_str());
  name[4] = 'X';  // the caller's buffer changes (CUPTI reuses it): ours does not
  EXPECT_STREQ(copy, "_Z1kPf");
  for (size_t b = std::strlen(copy); b < 32; ++b) EXPECT_EQ(copy[b], 0) << b;
  EXPECT_EQ(names.intern("_Z1kPf"), copy);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_STREQ(names.intern(nullptr), "");
  EXPECT_EQ(names.intern(""), names.intern(nullptr)) << "null is the empty name";
  EXPECT_EQ(names.size(), 2u);
  EXPECT_EQ(names.stand_ins(), 0u);
}

TEST(FunctionNames, FitCopiesOnlyWhatIsTooLong) {
  FunctionNames names(32, 33);  // a limit must hold the stand-in's hash suffix
  const std::string fits_s(32, 'f'), too_long_s(33, 'f');
  const char *fits = fits_s.c_str();
  EXPECT_EQ(names.fit(fits), fits);
  EXPECT_EQ(names.size(), 0u) << "a name that fits is handed back, not kept";
  const char *too_long = too_long_s.c_str();
  const char *stand_in = names.fit(too_long);
  EXPECT_NE(stand_in, too_long);
  EXPECT_EQ(std::strlen(stand_in), 32u);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_EQ(names.stand_ins(), 1u);
}

TEST(FunctionNames, ThreadsInterningTheSameNamesShareOneCopy) {
  FunctionNames names;
  std::vector<std::string> all;
  for (int i = 0; i < 50; ++i)
    all.push_back("_Z6kernel" + std::to_string(i) + std::string(i * 4, 'x'));
  std::vector<std::vector<const char *>> seen(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (const std::string &n : all) seen[t].push_back(names.intern(n.c_str()));
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(names.size(), all.size());
  for (size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t], seen[0]);
}

}  // namespace
}  // namespace parcagpu
