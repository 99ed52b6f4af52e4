package nodesim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A slow link delays every packet between the pod and some peers by a fixed time, as a long or
// congested path does, while everything else (kubelet probes, host clients) goes straight
// through. The kernel here has no netem, so the delay is made with an NFQUEUE: iptables in the
// pod's namespace hands the peers' packets to a netlink queue, and this file holds each one for
// the delay before accepting it. The delay is constant, so packets leave in the order they came.

const (
	// delayQueue is the queue number; queues are per network namespace, so one per pod is enough.
	delayQueue = 7

	nfqnlMsgPacket  = 0 // NFQNL_MSG_PACKET
	nfqnlMsgVerdict = 1 // NFQNL_MSG_VERDICT
	nfqnlMsgConfig  = 2 // NFQNL_MSG_CONFIG
	nfnlSubsysQueue = 3 // NFNL_SUBSYS_QUEUE

	nfqaPacketHdr  = 1 // NFQA_PACKET_HDR
	nfqaVerdictHdr = 2 // NFQA_VERDICT_HDR
	nfqaCfgCmd     = 1 // NFQA_CFG_CMD
	nfqaCfgParams  = 2 // NFQA_CFG_PARAMS
	nfqaCfgMask    = 4 // NFQA_CFG_MASK
	nfqaCfgFlags   = 5 // NFQA_CFG_FLAGS

	nfqnlCfgCmdBind  = 1 // NFQNL_CFG_CMD_BIND
	nfqnlCopyMeta    = 1 // NFQNL_COPY_META: the packet's id is all we need
	nfqaCfgFFailOpen = 1 // NFQA_CFG_F_FAIL_OPEN: a full queue accepts instead of dropping
	nfAccept         = 1 // NF_ACCEPT

	// recvTimeout bounds one read so the reader sees a stop; a stop drains the queue until a
	// read times out, for at most maxDrain.
	recvTimeout = 100 * time.Millisecond
	maxDrain    = time.Second
)

// delayRules queue what goes between the pod and each peer: in both directions, so the link is
// slow both ways. --queue-bypass accepts the packets should the queue have no reader.
func delayRules(ips []string) [][]string {
	var rules [][]string
	for _, ip := range ips {
		rules = append(rules,
			[]string{"INPUT", "-i", "eth0", "-s", ip, "-j", "NFQUEUE", "--queue-num", fmt.Sprint(delayQueue), "--queue-bypass"},
			[]string{"OUTPUT", "-o", "eth0", "-d", ip, "-j", "NFQUEUE", "--queue-num", fmt.Sprint(delayQueue), "--queue-bypass"})
	}
	return rules
}

// packetDelay reads one namespace's queue and accepts every packet delay after it came.
type packetDelay struct {
	fd    int
	delay time.Duration
	held  chan heldPacket
	stop  chan struct{}
	done  sync.WaitGroup
}

type heldPacket struct {
	id  uint32
	due time.Time
}

// startPacketDelay binds the queue in the namespace at nsPath.
func startPacketDelay(nsPath string, delay time.Duration) (*packetDelay, error) {
	fd, err := netlinkSocketIn(nsPath)
	if err != nil {
		return nil, err
	}
	d := &packetDelay{fd: fd, delay: delay, held: make(chan heldPacket, 65536), stop: make(chan struct{})}
	if err := d.bind(); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	d.done.Add(2)
	go d.read()
	go d.release()
	return d, nil
}

// close accepts every packet still held at once and closes the queue: what was delayed is
// delivered, not lost. Remove the rules first, or new packets wait for a reader that is gone
// (--queue-bypass then lets them through undelayed).
func (d *packetDelay) close() {
	close(d.stop)
	d.done.Wait()
	_ = unix.Close(d.fd)
}

// netlinkSocketIn opens a netfilter netlink socket inside the namespace at nsPath: a socket
// belongs to the namespace it was made in, so the thread enters it just for the call.
func netlinkSocketIn(nsPath string) (int, error) {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("opening this thread's network namespace: %w", err)
	}
	defer self.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("opening network namespace %s: %w", nsPath, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("entering network namespace %s: %w", nsPath, err)
	}
	fd, sockErr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the pod's namespace: leave it locked so it dies with the goroutine.
		if sockErr == nil {
			_ = unix.Close(fd)
		}
		return -1, fmt.Errorf("leaving network namespace %s: %w", nsPath, err)
	}
	runtime.UnlockOSThread()
	if sockErr != nil {
		return -1, fmt.Errorf("netfilter netlink socket in %s: %w", nsPath, sockErr)
	}
	tv := unix.NsecToTimeval(recvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("setting the netlink read timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("binding the netlink socket: %w", err)
	}
	return fd, nil
}

// bind attaches the socket to the queue, asking for packet ids only and fail-open.
func (d *packetDelay) bind() error {
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, pf (unused since Linux 3.8)
	params := binary.BigEndian.AppendUint32(nil, 0)
	params = append(params, nfqnlCopyMeta)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOpen)
	for _, a := range [][]byte{attr(nfqaCfgCmd, cmd), append(attr(nfqaCfgParams, params), append(attr(nfqaCfgMask, flags), attr(nfqaCfgFlags, flags)...)...)} {
		if err := d.send(nfqnlMsgConfig, unix.NLM_F_ACK, a); err != nil {
			return fmt.Errorf("configuring netfilter queue %d: %w", delayQueue, err)
		}
		if err := d.ack(); err != nil {
			return fmt.Errorf("configuring netfilter queue %d: %w", delayQueue, err)
		}
	}
	return nil
}

// ack reads the kernel's answer to a request sent with NLM_F_ACK (before the reader runs).
func (d *packetDelay) ack() error {
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(d.fd, buf, 0)
	if err != nil {
		return fmt.Errorf("reading the netlink ack: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("parsing the netlink ack: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data[0:4])); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
	return errors.New("no netlink ack")
}

// read takes packets off the queue and holds them, in arrival order.
func (d *packetDelay) read() {
	defer d.done.Done()
	buf := make([]byte, 65536)
	var drainUntil time.Time // set on stop
	for {
		select {
		case <-d.stop:
			if drainUntil.IsZero() {
				drainUntil = time.Now().Add(maxDrain)
			}
		default:
		}
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if !drainUntil.IsZero() && (errors.Is(err, unix.EAGAIN) || time.Now().After(drainUntil)) {
			// Drained: with the rules gone nothing more comes, and a packet left in the queue
			// when the socket closes would be dropped. The bound is for a namespace going away
			// with its rules in place, where peers may keep sending.
			close(d.held)
			return
		}
		if err != nil {
			continue // a timeout (to look at stop), or ENOBUFS: fail-open took the overflow
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		now := time.Now()
		for _, m := range msgs {
			if id, ok := packetID(m); ok {
				d.held <- heldPacket{id: id, due: now.Add(d.delay)}
			}
		}
	}
}

// release accepts each held packet when it is due; on stop, at once.
func (d *packetDelay) release() {
	defer d.done.Done()
	for p := range d.held {
		if wait := time.Until(p.due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-d.stop:
			}
		}
		_ = d.send(nfqnlMsgVerdict, 0, attr(nfqaVerdictHdr, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, nfAccept), p.id)))
	}
}

// packetID is the id of a queued packet message.
func packetID(m syscall.NetlinkMessage) (uint32, bool) {
	if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(m.Data) < 4 {
		return 0, false
	}
	for b := m.Data[4:]; len(b) >= 4; { // after struct nfgenmsg
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ unix.NLA_F_NESTED
		if l < 4 || l > len(b) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(b[4:8]), true
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return 0, false
}

// send writes one nfnetlink message of the queue subsystem for delayQueue.
func (d *packetDelay) send(msgType, flags uint16, attrs []byte) error {
	const hdr = unix.SizeofNlMsghdr + 4
	msg := make([]byte, hdr, hdr+len(attrs))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(hdr+len(attrs)))
	binary.NativeEndian.PutUint16(msg[4:6], nfnlSubsysQueue<<8|msgType)
	binary.NativeEndian.PutUint16(msg[6:8], unix.NLM_F_REQUEST|flags)
	msg[16] = unix.AF_UNSPEC                                   // nfgenmsg.nfgen_family
	msg[17] = 0                                                // nfgenmsg.version
	binary.BigEndian.PutUint16(msg[18:20], uint16(delayQueue)) // nfgenmsg.res_id
	msg = append(msg, attrs...)
	if err := unix.Sendto(d.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	return nil
}

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	b := make([]byte, 4, 4+len(data)+3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
