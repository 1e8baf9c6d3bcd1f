vcl 4.1;
# Varnish in front of a site whose pages mcache tags: each page arrives with its tags
# in an xkey header, and the site's purger sends PURGE requests naming the tags that
# changed, so Varnish drops exactly those pages. Needs the xkey module (Debian and
# Ubuntu: the varnish-modules package). Set the backend to your application server.
import xkey;

backend default {
    .host = "127.0.0.1";
    .port = "8000";
}

# Who may purge: the application servers, on a listening address of purges' own
# (varnishd -a :6081 -a purge=127.0.0.1:6091), so a proxy or TLS terminator on this
# machine that forwards visitors from 127.0.0.1 does not let them purge. Anyone else
# gets a 403.
acl purgers {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (local.socket != "purge" || client.ip !~ purgers) {
            return (synth(403, "Forbidden"));
        }
        if (req.http.xkey-purge) {
            set req.http.n-gone = xkey.purge(req.http.xkey-purge);
        } elsif (req.http.xkey-softpurge) {
            set req.http.n-gone = xkey.softpurge(req.http.xkey-softpurge);
        } else {
            return (synth(400, "Name the keys in xkey-purge or xkey-softpurge"));
        }
        return (synth(200, "Purged " + req.http.n-gone));
    }
    # Everything else follows Varnish's built-in rules: a request with a Cookie or
    # Authorization header, and a response that sets a cookie or says private, is
    # never cached here, as mcache's own privacy rules expect.
}

sub vcl_deliver {
    unset resp.http.xkey;  # the keys are for this cache, not for visitors
}
