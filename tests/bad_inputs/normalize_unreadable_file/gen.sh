echo hello > "$T/input.txt"
chmod 000 "$T/input.txt"
if [ -r "$T/input.txt" ]; then
    echo "running as root (or with CAP_DAC_OVERRIDE): chmod 000 does not block reading"
    exit 77
fi
