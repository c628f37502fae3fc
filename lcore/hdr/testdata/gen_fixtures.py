# Regenerates the golden frames in hdr_test.go with an independent RFC 1071
# checksum, writes f.pcap/g.pcap for `tcpdump -nn -vv -r`, and prints the
# expected VS/NAT outputs. Run: python3 gen_fixtures.py
import struct
def csum(b):
    if len(b)%2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b)//2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff
def ip(src,dst,proto,payload,ident,ttl=64,df=True):
    h = struct.pack('!BBHHHBBH4s4s',0x45,0,20+len(payload),ident,0x4000 if df else 0,ttl,proto,0,bytes(src),bytes(dst))
    c = csum(h)
    return h[:10]+struct.pack('!H',c)+h[12:]+payload
def pseudo(src,dst,proto,n): return bytes(src)+bytes(dst)+struct.pack('!BBH',0,proto,n)
cmac=bytes.fromhex('020000000001'); lmac=bytes.fromhex('020000000002')
cip=[192,0,2,10]; vip=[198,51,100,1]
frames={}
# ARP request who-has 198.51.100.1 tell 192.0.2.10
arp=struct.pack('!HHBBH6s4s6s4s',1,0x0800,6,4,1,cmac,bytes(cip),b'\0'*6,bytes(vip))
frames['arp']=b'\xff'*6+cmac+b'\x08\x06'+arp+b'\0'*18
# TCP SYN with MSS, SACK-perm, TS, NOP, WS options (20 bytes)
opts=bytes.fromhex('020405b40402080a0001e2400000000001030307')
tcp=struct.pack('!HHIIBBHHH',40000,80,0x12345678,0,(20+len(opts))//4<<4,0x02,64240,0,0)+opts
c=csum(pseudo(cip,vip,6,len(tcp))+tcp); tcp=tcp[:16]+struct.pack('!H',c)+tcp[18:]
frames['tcpsyn']=lmac+cmac+b'\x08\x00'+ip(cip,vip,6,tcp,0x1c46)
# TCP with odd payload (PSH|ACK)
data=b'GET / HTTP/1.0\r\n\r\n!'
tcp=struct.pack('!HHIIBBHHH',40000,80,0x12345679,0xabcdef01,5<<4,0x18,502,0,0)+data
c=csum(pseudo(cip,vip,6,len(tcp))+tcp); tcp=tcp[:16]+struct.pack('!H',c)+tcp[18:]
frames['tcpdata']=lmac+cmac+b'\x08\x00'+ip(cip,vip,6,tcp,0x1c47)
# UDP DNS query A example.com, id 0xabcd
q=struct.pack('!HHHHHH',0xabcd,0x0100,1,0,0,0)+b'\x07example\x03com\x00'+struct.pack('!HH',1,1)
udp=struct.pack('!HHHH',53000,53,8+len(q),0)+q
c=csum(pseudo(cip,vip,17,len(udp))+udp); c = c or 0xffff
udp=udp[:6]+struct.pack('!H',c)+udp[8:]
frames['udpdns']=lmac+cmac+b'\x08\x00'+ip(cip,vip,17,udp,0x0001,df=False)
# ICMP echo request id 0x1234 seq 1, 32 bytes payload (odd? make 33)
pl=bytes(range(0x61,0x61+23))
icmp=struct.pack('!BBHHH',8,0,0,0x1234,1)+pl
c=csum(icmp); icmp=icmp[:2]+struct.pack('!H',c)+icmp[4:]
frames['icmpecho']=lmac+cmac+b'\x08\x00'+ip(cip,vip,1,icmp,0x0002)
with open('f.pcap','wb') as f:
    f.write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))
    for k,v in frames.items():
        f.write(struct.pack('<IIII',0,0,len(v),len(v))+v)
for k,v in frames.items(): print(k, len(v), v.hex())
print('---')
udp=struct.pack('!HHHH',5000,5001,10,0)+b'hi'
f=lmac+cmac+b'\x08\x00'+ip(cip,vip,17,udp,0x0003,ttl=1)
f+=b'\0'*(60-len(f))
print('udpnocsum', len(f), f.hex())
# IPv4 with router-alert option (IHL=6) carrying UDP
udp=struct.pack('!HHHH',1234,4321,8+3,0)+b'abc'
c=csum(pseudo(cip,vip,17,len(udp))+udp) or 0xffff
udp=udp[:6]+struct.pack('!H',c)+udp[8:]
h=struct.pack('!BBHHHBBH4s4s',0x46,0,24+len(udp),0x0004,0,64,17,0,bytes(cip),bytes(vip))+bytes.fromhex('94040000')
h=h[:10]+struct.pack('!H',csum(h))+h[12:]
f=lmac+cmac+b'\x08\x00'+h+udp
print('ipopts', len(f), f.hex())
with open('g.pcap','wb') as fh:
    fh.write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))
    fh.write(struct.pack('<IIII',0,0,len(f),len(f))+f)
def redo(f, newdst, newdport, dec_ttl):
    f=bytearray(f); ip=f[14:]; hl=(ip[0]&15)*4; tl=struct.unpack('!H',ip[2:4])[0]
    ip=bytearray(ip[:tl]); proto=ip[9]
    ip[16:20]=bytes(newdst)
    if dec_ttl: ip[8]-=1
    seg=bytearray(ip[hl:])
    seg[2:4]=struct.pack('!H',newdport)
    off={6:16,17:6}[proto]
    old=struct.unpack('!H',seg[off:off+2])[0]
    if not(proto==17 and old==0):
        seg[off:off+2]=b'\0\0'
        c=csum(bytes(ip[12:20])+struct.pack('!BBH',0,proto,len(seg))+bytes(seg))
        if proto==17 and c==0: c=0xffff
        seg[off:off+2]=struct.pack('!H',c)
    ip[hl:]=seg
    ip[10:12]=b'\0\0'; ip[10:12]=struct.pack('!H',csum(bytes(ip[:hl])))
    return bytes(f[:14])+bytes(ip)+bytes(f[14+tl:])
print('NAT tcpsyn', redo(frames['tcpsyn'],[10,0,0,5],8080,True).hex())
print('NAT tcpdata', redo(frames['tcpdata'],[10,0,0,5],8080,True).hex())
print('NAT udpdns', redo(frames['udpdns'],[10,0,0,53],5353,True).hex())
