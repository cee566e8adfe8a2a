set -u
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit --format=csv,noheader > $OUT/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DTRAINSIM_BENCHMARKS=OFF > /tmp/cmake.log 2>&1 || { tail -20 /tmp/cmake.log; exit 1; }
cmake --build build-gpu -j16 > $OUT/build.log 2>&1 || { grep error $OUT/build.log | head; exit 1; }
nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 50 > $OUT/clocks-gemm-conditions.csv 2>&1 &
smi=$!
S="--shape 8192,32000,2048,0,1 --shape 8192,2048,32000 --shape 32000,2048,8192,1,0 --shape 2048,128256,3072,0,1 --shape 2048,3072,128256 --shape 128256,3072,2048,1,0 --shape 8192,2048,2048 --shape 4096,16384,3072 --shape 2048,16384,3072 --shape 8192,11264,2048"
date '+%H:%M:%S.%N start' > $OUT/gemm-conditions.txt
./build-gpu/calibrate gemm-conditions $S --idle-ms 20 >> $OUT/gemm-conditions.txt 2>&1
echo "exit $?" >> $OUT/gemm-conditions.txt
date '+%H:%M:%S.%N end' >> $OUT/gemm-conditions.txt
kill $smi
