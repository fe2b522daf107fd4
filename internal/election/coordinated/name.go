package coordinated

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// nameHashLen is the number of hex digits of the hash that ends every
// candidate name (40 bits).
const nameHashLen = 10

// CandidateName returns the name of the LeaseCandidate that identity
// publishes for the Lease leaseName: "<lease>-<identity>-<hash>", lower
// case, with every character a DNS subdomain does not allow replaced by
// "-", shortened to fit 253 characters.
//
// Guarantees: the result is a valid DNS subdomain (and so a valid
// LeaseCandidate name) for any input, including empty strings; it depends
// only on its arguments, so a restarted process finds its own candidate
// again. The hash (sha256 of both arguments, length-prefixed, 40 bits) is always present
// because joining the two with "-" alone is ambiguous ("a-b"+"c" and
// "a"+"b-c"); distinct pairs therefore collide only with probability 2^-40.
// The readable part is for people: never parse it back, read
// IdentityAnnotation instead.
func CandidateName(leaseName, identity string) string {
	// The length prefix makes the hashed encoding of the pair unambiguous,
	// whatever bytes the two strings hold.
	sum := sha256.Sum256([]byte(strconv.Itoa(len(leaseName)) + ":" + leaseName + identity))
	suffix := hex.EncodeToString(sum[:])[:nameHashLen]
	readable := sanitize(leaseName + "-" + identity)
	if max := validation.DNS1123SubdomainMaxLength - nameHashLen - 1; len(readable) > max {
		readable = strings.TrimRight(readable[:max], "-.")
	}
	if readable == "" {
		return suffix
	}
	return readable + "-" + suffix
}

// sanitize maps s onto the characters of a DNS subdomain: lower-case
// letters, digits, "-" and "." where "." only separates alphanumerics. The
// result starts with an alphanumeric (or is empty) and may end with "-" or
// "." only when the caller appends an alphanumeric suffix after a "-".
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			b.WriteByte(c)
		case c == '.' && i > 0 && i+1 < len(s) && isAlnum(s[i-1]) && isAlnum(s[i+1]):
			b.WriteByte('.')
		default:
			b.WriteByte('-')
		}
	}
	return strings.TrimLeft(b.String(), "-.")
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
