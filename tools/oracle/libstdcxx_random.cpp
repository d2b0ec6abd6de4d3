// Reference draws of the libstdc++ random streams OneFlow 0.9's OFRecordReader uses, for
// tests/test_compat_oneflow.py (recordkit.compat.oneflow._random reproduces them in Python):
//   g++ -std=c++17 -O1 tools/oracle/libstdcxx_random.cpp -o /tmp/libstdcxx_random && /tmp/libstdcxx_random
// * the shuffle buffer: std::default_random_engine (minstd_rand0) seeded by std::seed_seq({seed}),
//   std::uniform_int_distribution<>(0, n - 1) per record (random_shuffle_dataset.h);
// * shuffle_after_epoch: std::shuffle(parts, std::mt19937(524287 + epoch)) (ofrecord_dataset.h).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  for (int64_t seed : {7LL, 0LL, 123456789LL, -5LL, 5000000000LL}) {
    std::seed_seq seq({seed});
    std::default_random_engine e(seq);
    printf("seed %lld:", (long long)seed);
    for (int n : {3, 1, 7, 1000}) {
      std::uniform_int_distribution<> d(0, n - 1);
      printf(" %d", d(e));
    }
    printf("\n");
  }
  for (int n : {11, 6, 100000}) {
    for (int ep = 1; ep < 3; ++ep) {
      std::vector<int> v;
      for (int i = 0; i < n; ++i) v.push_back(i);
      std::mt19937 g(524287 + ep);
      std::shuffle(v.begin(), v.end(), g);
      printf("shuffle n=%d epoch %d:", n, ep);
      for (int i = 0; i < std::min(n, 12); ++i) printf(" %d", v[i]);
      printf("\n");
    }
  }
  return 0;
}
