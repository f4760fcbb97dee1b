STEPS='build' scripts/device-two-gpu.sh >/dev/null 2>&1 || { echo build failed; exit 1; }
b=build/apps/wholestore
export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN
for layout in "continuous distributed" "distributed distributed" "continuous continuous"; do
  set -- $layout
  echo "== 2 simulated hosts, graph $1, features $2"
  timeout 90 $b launch -n 2 --hosts 2 -- $b sample configs/sample.yaml --set sampler=gpu \
    --set graph.type=$1 --set features.type=$2 --set graph.location=device \
    --set gen.num_nodes=200000 --set gen.num_edges=4000000 --set epochs=1 2>&1 |
    grep -vE '^\[rank 1\]' | grep -vE '[0-9]+% \(' | grep -E "hosts|sample  |gather  |summary|error"
  echo "rc=${PIPESTATUS[0]}"
done
