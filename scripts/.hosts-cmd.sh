STEPS='build' scripts/device-two-gpu.sh >/dev/null 2>&1 || { echo build failed; exit 1; }
b=build/apps/wholestore
export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN
for t in distributed continuous; do
  echo "== sample gpu, 2 simulated hosts, graph $t"
  timeout 90 $b launch -n 2 --hosts 2 -- $b sample configs/sample.yaml --set sampler=gpu \
    --set graph.type=$t --set graph.location=device --set gen.num_nodes=200000 \
    --set gen.num_edges=4000000 --set epochs=1 2>&1 | grep -vE '^\[rank 1\]' | grep -v "%|" | tail -12
  echo "rc=${PIPESTATUS[0]}"
done
echo "== gather bench, distributed, 2 simulated hosts"
timeout 120 $b launch -n 2 --hosts 2 -- $b bench configs/bench_gather.yaml --set types=distributed \
  --set locations=device --set row_bytes=512,4096 --set table_gib=1 --set lookups=1048576 \
  --set ops=gather --set repeats=5 2>&1 | grep -vE '^\[rank 1\]' | tail -12
