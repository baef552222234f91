set -x
echo "it's \"quoted\"; 'both' ways" > "$NEMO_GYM_BENCH_DIR/artifacts/said.txt"
python3 -c 'import os; print(os.environ["NEMO_GYM_POLICY_BASE_URL"])'
