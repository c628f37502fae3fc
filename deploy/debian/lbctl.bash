# bash completion for lbctl (dplb's ipvsadm-style command line)
_lbctl() {
	local cur prev
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	--diff)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	-s | --scheduler)
		COMPREPLY=($(compgen -W "rr wrr lc wlc sed nq lblc lblcr dh sh mh fo ovf twos" -- "$cur"))
		return ;;
	-b | --sched-flags)
		COMPREPLY=($(compgen -W "sh-fallback sh-port mh-fallback mh-port" -- "$cur"))
		return ;;
	-o | --output)
		COMPREPLY=($(compgen -W "json text" -- "$cur"))
		return ;;
	--socket | --binary)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	-t | --tcp-service | -u | --udp-service | -r | --real-server | -w | --weight | \
		-x | --u-threshold | -y | --l-threshold | -M | --netmask | --client | --reply | -p | --persistent | \
		-z | --laddr | -k | --blklst-address | -2 | --whtlst-address)
		return ;;
	esac
	COMPREPLY=($(compgen -W "-A -E -D -C -R -S -a -e -d -L -l -Z -c -n -t -u -s -p -M -b -r -g -i -m -w -x -y -o -h -V
		--add-service --edit-service --delete-service --clear --restore --save --add-server --edit-server
		--delete-server --list --zero --set --tcp-service --udp-service --scheduler --persistent --netmask
		--timeout --dry-run --diff --reply trace
		--sched-flags --real-server --gatewaying --ipip --masquerading --weight --u-threshold --l-threshold
		--numeric --connection --client --stats --rate --thresholds --persistent-conn --per-lcore --sort
		--exact --output --socket --help --version reload upgrade --binary --fullnat --synproxy --no-synproxy --ops --no-ops --quic --no-quic
		--add-laddr --del-laddr --get-laddr --laddr -z --add-blklst --del-blklst --get-blklst --blklst-address -k
		--add-whtlst --del-whtlst --get-whtlst --whtlst-address -2
		--ha-state --ha-check --links --bgp drain undrain --daemon --start-daemon --stop-daemon" -- "$cur"))
}
complete -F _lbctl lbctl
