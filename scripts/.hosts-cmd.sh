STEPS='build pytest tests' GPU_TESTS_TIMEOUT=280 scripts/device-two-gpu.sh 2>&1 | tail -14
b=build/apps/wholestore
export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN
echo "== gather bench, 2 simulated hosts on one GPU"
timeout 120 $b launch -n 2 --hosts 2 -- $b bench configs/bench_gather.yaml --set types=continuous,chunked,distributed \
  --set locations=device --set row_bytes=512,4096 --set table_gib=1 --set lookups=1048576 \
  --set ops=gather --set repeats=5 2>&1 | grep -vE '^\[rank 1\]' | tail -14
