# Sourced by the bench scripts that run nginx. nginx_conf TEMPLATE DIR PORT
# [UPSTREAM] writes DIR/nginx.conf from TEMPLATE, filling in @DIR@, @PORT@,
# @UPSTREAM@ (host:port a proxy passes to, when given) and @USER_LINE@: a
# `user` line only when run as root, so that the workers keep the user that
# owns DIR instead of dropping to nobody.
nginx_conf() {
    mkdir -p "$2"
    user_line=""
    [ "$(id -u)" -eq 0 ] && user_line="user $(id -un) $(id -gn);"
    sed -e "s|@DIR@|$2|g" -e "s|@PORT@|$3|g" -e "s|@UPSTREAM@|${4:-}|g" \
        -e "s|@USER_LINE@|$user_line|" "$1" >"$2/nginx.conf"
}
