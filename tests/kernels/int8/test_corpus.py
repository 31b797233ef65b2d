"""Corpus reading (EC02 / LZW), book splits, tokenizer and batch determinism.

The LZW fixture is real data: the last compressed segment of ``usr/lib/bible.data`` from the
Debian package bible-kjv-text 4.38 (the end of Revelation, public-domain KJV text). Regenerate it
with ``python tests/test_int8_corpus.py DIR/usr/lib/bible.data``, which prints the base64 block.
"""
import base64
import hashlib
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
import torch

from profkit.kernels.int8 import corpus, data, tokenizer

# The last segment of bible.data (bytes offsets[-2]:offsets[-1] of its EC02 table), base64.
KJV_LAST_SEGMENT = base64.b64decode("""
csqACENnIBs2INK4AUEHTZkyOwa6IcPQIQg7b9KMEfjGTEWBYuSkIVPmjJw3b9pIpNjxI4iQIwXOQRPm4EuBDsPIoejmDYg2
bwIOLFgTocKPZXSAMBO0Yp6fZeSMoemGzhwQd6IKbCjQZBmCUBe25Ariq5yGEZnKefm04dM5QTeKLHM1q9CiINwQTPPGzVWS
G9PYKUPGhQIpZezEwKFDBg0QQSYmXOhw7Z0wV5nWkUxWDBuULD3COQnHoVUWK0G0nBNG4enULfE2BGtXJpvWC+vA6evSbEPD
iBXn0BEDsuQwZuhE/ThnKxqFZ64mAZFz50AQXsFi1MjRY5s6U0HAKfMGDhuBR3MOdoOadR7oqIMcLMOmTpowEafUtLO3L+ow
kp3xmRx5/CcZGn29UYccBlK0m12obUaHT2QxERRLC4JwxBtk6HBYYjEMJwMIRjRFhxx1CAQgRSKdgYZyCl6lE05pXKVGHWSc
0UYZVc2hlFrU4UQQGiDcmCNhLmVX0B0IBoQakxoRScZIIIwRFIpwFESWb0TekUZDQa6llhsa9cdeajSBGcZ6ZyDZ2WccqubR
c1c1Jwd/PQ4VJnUrAgficDMYR1EYZ+D20VutkRHffPXd5wIIgu45B1BrCHRScyDotlRTiS23YlmDyeGncDo8FhlFZGm21qd0
ZFXVU/SRJIeMnFmk6k2YWbUUfQiR8cYdC316R1AzpQHHeBRtiGqaILBWEG9kNXSSG2W0F8Z7bpwR345uRCTfeY2GMWqIOtQQ
aRgXZbRRlWHsqFodz3oULRrTVtvstfCBAIUcrWGq4FrK/mdTHjTWGRWer31KcEVgmWEWdWm0gZoYb4A5KV6fKjnucDZEOl11
g171JVZaubTdurFhFxBY37FBx5c42vspZiar291PAD51mXKzNjjQVWSdfHMbabhIR1tobCYrdHNYi622kDFqXxg/mmiRhdYp
q1obZO6mXFUgBFQ0tb99SOoNIDBRRkF1XCVGV7cNKllAatjs8xmC4ZRghhNC3EbVa5HVhk4iEXpzhe2KkdBVVu7oM51YpeEw
n2AOTlKYzbHh0cpk5LGxDjhE2ndlWNFsEoDKLQvWTDIhWAcbFL09kBz8EkzRUWYoJBAbup85xnkApgalcoC7lDu1IPBO7UI1
utTii+S1Te0cV62Gm1Wf5xCpRax9SaSEPjkOwhUiKYeaEOdRj+SMh2L1XHjsj1EUkuC7NDjt97XZrG7jrTXW1Yl71KmCdC/v
Zaoq4bMXFRyCKfZFC0UywVe2qucRZX0uBjDw2K5sAhbIOWxtDPHJsGb1HDj4TYAHiiCV6ie+KTykIgoCga8SUpCe0EEp02mX
Uzb4mTvYCWE++99TQrI2evGIYQWhyWBcopw5vAwobnhKS5RAl7YpZYTFMqGyihctujyxL1L0CBXn0LbFuWQOcEhD+eQkHtI4
ZAyeMxu5YlCcAU6HNXcI0pqOWB4eEcZnb0MQ7K4zPL3NCiJocs7qwKIb3jxHJZdh3PwoYoTWNMQMr0sNFSDos6M8D0bSo8tV
LOIrMBlJf58aXKVKJyo5DicGI0JC88pAsLqUjGboMsNt3NWS3DkJNpRpXk4oUhucRbFKJwHWHCLyKYvQZFB5aZdA7lC+r6Fm
NjUMX/DWQK07TAxeBHxk5sxwwUAN0CKRrNJnuEJMA6JrME5ckECmdCwkHcUzoFFKM5unF3c1T37zocgCBXKFC7HRgq4kjqlq
pSI5EI0u7osSyYSSnq+sZ1MH+RWSHpmp3SykkNQhFl1Q87uKOeR2Czne7nr3pOcoJzW/+4obLmiuASooXhC7ClDgRaQzvKGI
15mJTkw4hxEqComRA9PIuOe6QU7qS84RiF5e1hcfJbJZNLEJis7zEUi6M2xxaoka+6LPFDKEc0Ali5eoNRpRsjFVaYjKRqZH
K2LyC0wtkQ/RjPYUhAZnjh07p5DwGsyrwJMO8gRmTitSNCKhq5/TrCaPULOEJDjhCCB4ghFAUNnLTiE+TiBC2p4gBdFqdrSl
ncIF0WbHe+UxeABqE0KcuCLoTOaMm2GmWccwl3aqKXkKoojQnGbbvsnGVr9iA9CYpcunHEVwI3EiG9UzWRAMISUqCtCQlpOH
f2UOniFsE1fWUj+ykLGe/pOXRZSkIQ7tIKGLAcECwbKwwcEKLKlKH5Fasgam+Sy/dNmvR+SXJdw0LTUAngkb9/qip3Drv7bS
73RFeuBP/a8MKsFms0YGLYdIDMERDjAb8fLgl5h0KQHJbuz6clSKWWxwHAzQyuhwQe21Fo8ueVuuICyQ/k7wrRbhEo/VOLuH
HrhQ43XTG8RLur6pcpo6GUihFCJdjmrYWapZCFma1ByfEcrASWyeTtoQx7+KKIMD7MxXpJtOOoShUmcSlgGtbKuaYGo05TEN
UqmpIKP9RI1hiKnbyqAWGn3YS2CCUnhIWYbADGZZGEbqM8PW6DLkDdI4k8MagAySNdOBxxlmFhZLiKzFRsxwjxooplzcpZLJ
T7o1ydtkjJu8N9/MlyBZEJmylVQiwaQNTuxLGT4ngzoylNJcQ91EbWMoRBPJvEadbsSQiuVGatmZIm2pRItqUDxvhDBIuqm0
dXpTNJR1UDZJVXJtKZTcBbTXHyGyLgM8KhnAgDgaxDFss0WfKmFXhr9K6UlUQt0zKbG4FqlUGHNcsQm1IX1XSSNRjqOyrxRk
KoZKjzD7ZDZ7N2Z7u0tUSAfZ4Xnyy6dn0vAbnBqV8VRF2+FpHlmIkJg0sMFn+nFznCVDMaX57ToNiZHCzNK0jt/bnJJ5dZhV
4hoKWcTFDoe4eL7ks5mAk6O6qToI0dWcmnTUkRG7JrOYqqBBAsbSSyTLVPnil7yELyj2elm6LRL0tg1dJ3VqauwEgknN2fw8
HUoNcngmaYF8R7qyg1NzoMk7OtCBq12Hy0yNXqp8hyGP0hJ2hRmKKLZ5tKs+OyW3lmS6vOUGgV09NwjuePkzlp2CXd1zyQL5
FZJQBEhq/RJd2TjGtvkM9+g0aEsCJrz3EWnSNsQKsUjtpqd7GjXU8t5yIHfqNkHf0uPlE4sqfenF3m/T1o63mOA+zAM35bkO
ITJVyLBMENMyed3/lNjOQC3fEmkI9KoRUWBod8kQDO/1dm/mIgTgRBYBIV0XJkO1B3+P5nZEMWWnJ3dM5Dqs4X9Et2xLoRA1
clKpRn3LxXdqJF0HuCABMQZUNXnB4XEdgz6itD4HsnLONUqKlERDIh46URDoB4KzUhAjSDuNdoJKwRtkFB7m1WgspoA1mCZE
0hPioVEM8hIF6BBvkVUIITujEVdOBHtaY2EegX8i4URVR4WUNjbwxlHoUncVSBH/NysBqAOsJRlMckTzInQWiHezIxBlgAdp
FBBHlXPBI1Q2kXgosXjvglOQc4WSxwKUFzoDBIgI4VOFGEIK6GhRFU0nWBfGd4e3pW4ZEgd1cINRAXtbcoNogBobcgap0QSE
smTX5BNI1mQeFl5FtBx9IwYE8XhJ4RJuUAdt8Dbp5T4pYUY0Y15ceEZf0YY2xnkkAzaaUnIvwTl4pV54SIo+0zhwgBmESBby
0wYmlIDdkydh0HOf5n438RkNOAZfkgeqh2vs4i6+AiwoFoxaI24tUXA+QxIYIU+Q1gZtiEGiw2h2YHNIdXbdxxWQRDNKN2tO
F3Kr1EtqpGLPGDHBRi0tVTJqlivkaAZ2JhB4Vhpb90uf4og3EUIOxSOpI0PXkhpk4mdA0imrIhku2Y/GRhGs91oVRxsu5Rz1
8jjTdmVgwRtUF4+QhCCYopHrMopn4VjHVnBLAXgDcRl5oFuQJhTppBmSwYTmEWh8ZzUY1o8jcmOtRxYkEQZHdTExRhFK0h46
t3eF1l5kIJUM9wZrwG4c4XKEoXoAYlLLQTFyWTrVY5dHpWhEInNPhxKb1hK84zCqJ5YLWEynFG7g9D9vgCkNwTQRFR7FRE1f
8jWbWJhyWWFjYCU7UVwLSWQjNJf9iHSY1nXYsUcd5RJjSUyZWExH8SVwOZZqkkI2QRK8Eyr0Y0KMSZaX2WoUdW0YtphSiIGP
SREu6WCwFZoXQprip3yaNgf9uFAUgZtKSREOYRPFlJBN5xK30ZAegWsd2DyEKRNGKBna2Y81BYdE+VOh4pcOuCk+p5mOd0Q5
aGJ9iZiSA2WSJF3hSRbjeWsPWW8xgG9gaZPdpEcXNTN5UQZ5xCVcZCshmEQWdUSsYqE7WBakiIHXqD6DApVwmWT0yYRAIRRd
h6Af11pK8AZosBA4tmUwWCXpeH15REUowhrn8WGNY1vvKHDyGFaROScZeiZtdY18+DPXAROXQ5ZBUX+bshakkzRzYIsTwaKq
uXp6ZB3owl5CE4n1eKT38jTnUwaCdFTREo5RoRcxdVBx0jzOFhaPM01/J0NZ4Z0GZJA8NoV4ITuHSB7mITOSoTXiRB8eIZKy
M6d8mhqywxVE5leJUWyVN0BaI5JeMh5PmZKycYFmMHDTSUt0UaKV0Tp/KlVvJxTaeX3StxZwQTu/An1NwVtmGqGtilXHNXvZ
5WBwZ4MKUaFbWZKB8xw/xj4hSoiXdy0s+p7cOYP34nnOmHnI0z1HJQRounJHNR1PZhAIUZk/1k0o1KwFRBEsZC/kA1XAiilG
JSNCcSIpkhoa6T19x6KBZVbUekBOZi9JgIN/IWyPkkMqIR+lgS6f8gQ7Uihi12l44wa7hoobiodZyqVeYhN4s0T1Q2dgIWaV
2aEJaJVudhQJuDPL4Z+T86kPwQZlNqkJijZI4KxvECqNA1QiqRCVMTLHxTRwOR0TW4UF45Z1iquBaHhv0RcsGjoEqCW2YhZ9
5zOb8Ta8U3PZwmMDQTFEoxeeQagU8R07oRU9U3xwB0Vt0rUhGRdcu3m34yu3wTNmy63wh3ftIYZKFFVEpqQ4aJy1tkqCCYVy
QDZdYkDs+Cm/NpG5mLfp2SzrmZ0WhwYsmoxTKRDbKBDlmmWHwz2dEiz8plzDqX3GeFEBaWdL8ToI4Y2VW2vSlZVnkCJr62Zs
UCn2BxXEFbXW9W8uVRmoobN3yjqY5xCV6KRxB0C9eAJ18Z8s6o+CxS74gyTukqzOZbdopEYjQ2vstU8u8hMKUhW4EYYSirzO
yl7oeDQJO3JPoaN216OoQRJzMFdTwmv0aKR7JKQqETAdl6B0BAJIsCYIBzdBsXBblEhrwTt+lk68s0r1w3UTgjxAUbolyBe+
BypHFMAqUiSY0T/NUsD2ElNRhpAEQlts8F4pKL9feSDCiS6XQbEzhiaN9TjC2Sr0sURINlKCh7RdQRAQpcJssESxRR9rC1l1
IVnGGRD+kbkOZBE6zGkMkadpJxJvI4oWMRU2RwYBIRYekQRzwC/04SEdTByB8gR262kVkWKt2UQR4Yw9kZRd/EIt3H7OCBc8
VcYxDMaKpVZexMZfTBfDi50uMcKhK402ejSaS8NLZJVkYCZrm4OhJlXSpMRbYcQqshtOlD5EzAQBFL/EwawEpGGqy7rw5i6T
9qXYekQphioJhBmJpY03So5n/BE+bAZSi8eoTB7kJMkxUK+Y1r1P8bRgoipz4IkzIrXnkS1KJSNXcRtygEof+Iy11xCqZxE7
IspLSsp8zKgW8cnXpMj8l4afKwefMUEduDs8cga5iWlERJbf7BLp52diRRRCUQa6zAbD+4biusxk1MzolKupbCDUoTRL+ilq
wcf6/C9VUgdi8CWgKZrpi4p9IzhrllgpMzgpxyw1ghoJeMPsDMuMeGxiYB+wY1shixfnTJ8toQYRHBXI6bjpSJ9wkFg+BTuo
4cD46hMWvBYCgo3Dy7jGU72BfIlEzMoJSMsYWCh7u4FIMqckBiDU8otthY4xMsGat80Z2KGAbCb0CdJoFBURUYRWMhHWcizP
ERBVTXdbfVTognFssBG+EkVdvZUL0hD2jGFRURNvKcn2Jl8WmhyleC87AUZ4cNYbhgdqbddT0jZ63Rzr0ddTkcEwqBx6bWlG
U9e+mAcbrIuuUddnWB5hoAd6/TV9Hdb0kgdwMRqi3H5bch6DLdkQjI5VgQaXnad0bc/S5BZOxKLF9o+JvMJtDFHF5MccaRbK
pRTNabih4nUt7NEeIWziodsjPcEphlPOrDM0c9JCkdJgLTJLYpH84hdKapLYcRvUA9sfTJOu5XYMgWGD2sq/OqUugTXJEid6
1Vj8fGyQ3Iua2EXcyFXnDNtbutyay4TUEm56TEZnEn3Zl4BA8cN9UyzIU5s3ZN5kISD5C6fZSSX+Cz3MM44PmzaJY0YEyt6t
3BGwbcdqJ8icNpQSxT6s0YCYWhObtp8RjlNfctw+Fh1EzCUAF5G8BqkwPSBP0Ux7sxbh+SWwTckLLsOwNzIimXyyY3VEQRSB
+BSBrI4KXqpAy7PgvZIv0sqwLcvto6giUePrheNosuNEvHZVpZA0BNvu3MpRfltM6CWYYpLL0eMThzQIBxYk4W5FxKrZxyQE
ARcuSZ2VoiZUqxBmAtFr8WS/9bRKcdEwrDOZyD74yZn7+d5iALz8eZgekZjD1nEyoKD26hBZkbUP7NyWkje/KLK/iOkkBTyr
wjgZrLqo4W0PUdBiqsfSejNbKBkJKOn1tukjkgR2SzTsp9zccyIPweIUjusLgX2kMwcxQcQiESpPMoxQ/kAvRLL2kre22K7U
zNBFzUafah8J439xBTsbtRzfPjK9DUXITI7AA14JSOzTVDLAhxNfoTyomIBi7he7rgP3DeWKiqrUKxRjsCDNkehRqJPEPXxx
UoyIA9//flu2acIGcyeok3d48UOGZsWTuukenpwi2Rw9a5SItE9XAVlpLjs5KG/kV3vWqenlItsqKoayo98anmSk+n77zRMu
vSLngeeks+JE7N9pwZVpY1BaU7FpFYsrPtJ+qlWKnVKcMp+fEpMuj+XcI3LlihqqFkFPw658Z0lo0HcIBkHHjd5uScSC9BQd
aRoGAzaQI9GSiLstvVg/VPETaJl5e3gFMRNB8XhDNE/+6vJoY61pWrv+5i6eqBFrgLKJDnH2JINIVSllMB5gQoxdT8Rr32gL
V5luY5j7XtHe/aIx+t1cQZnEGh11qhP7GK7uc0QfI5wgkxogfybT4TC7GXCSOGrGchNtmSrFTsRwn7e4q73M4RxMs+/aM1Ay
CvYElPUg4ELOEUMzNDI2VDwAu0O230N1/3KwoV5DFBDSIocWkfnhHhqxl7eSD5xXf/n/0zx8uQZXtHy7L6l2IAObTrz2yvzO
70Jel3yWb5kJKPPBESDj/gwTsGIIEQM9yAgalKVc3vxqWUileWyGGwGGkgcI4SiyYwK2jb0nd9hAMpsmmah5uBu3sNIu4LSR
HSMQDbyFDvgBI+BV+CTR48Cch6UzkmBgUnMif6cFahhhAoNKIA0EVDUKBx6EfQdLBMXEuFYqjUvFLBCQ+MbA4otKqYHMUJrL
YB3klAERH30D6TEwAmFMBgJ0Gk28hmZAjtN08jJdCrp/geL6CSyakBoMVkkIA9/rbSyshkWOeISa4lCw5thoNxrjAB8DCxJR
8S05aZgZAjkaB0MjA6PnwFiy5GRf+MQS+SSSiNrdDFQXBVOSm+Nx1+Yk1IHpFeSaCJlbbkTQXJQIy+A9xA378BWoT/aRrYAg
tuDT1+oLYWttaS1ZEYo6CdqSYa1QNk0m+bQczBFQSSW25tDFFSLYMaZD7xklrqk5gI2qlV1kSyT0IpLjKdSP7lIHih9j+TH7
aSosiKlAx7iUDjFAKGHiYJqOYAbQyJa7dx6BCNgvsGbRIGEqiVK2hba0kjNIHM4cWZgCe8hmtcNm5x5Qw3XZEaxvBv4cDVMd
ZNa18IfYJSCawFCTsRbgVpMuMYv1MYld2Od2lg8ciLbmjuFCNoLpUMzJSln17/6FjlHIpZrIyzAD0hD1pLvgQRDNQtKbJhcC
kbWRPKP5CGDnk0u1yyPkjC4oksgSuUI9pc/4TRBTFCd6Ihn4iaOjJ42/23C6ZhizcHQ8rDMVQLmk8UIicaBpkkMiOCcZJYbc
zCpRXkLpjsVEIvb+bOJM9EhwhChSBJHkFVUEVFosdGvWxSVLB38cRhApUuSsRtGy3wOq5gXea3RUKSqin6m4BvZdXIOAecsk
So64UvkYiFCEcd2jr00BeYKylOC/aYJPUIBwi0dRBC4KXCAp2AU1mL1jaBiLw0BRGVqJjfiz0VhFroIX0j8jaU5RQ26lGXmE
YQA=
""")
KJV_LAST_SEGMENT_TEXT_SHA256 = "3a0a44f7ec47395cb5011f5b85abdcdca9268d7f6af6b1932f58ef3ecd94b157"
COMPRESS_HEADER = b"\x1f\x9d\x90"  # compress magic; flags: block mode, 16-bit codes


def ec02_container(segments: list[bytes]) -> bytes:
    """An EC02 file laid out like bible.data: title, count, offsets, compress header, segments."""
    head = b"EC02Compressed Data File".ljust(0x58, b"\0")
    table_end = 0x58 + 4 + 4 * (len(segments) + 1)
    offsets = [table_end + len(COMPRESS_HEADER)]
    for seg in segments:
        offsets.append(offsets[-1] + len(seg))
    return (head + struct.pack(f">I{len(offsets)}I", len(segments), *offsets)
            + COMPRESS_HEADER + b"".join(segments))


def cut_fixture(bible_data: str) -> str:
    """Base64 of the last compressed segment of a real bible.data (the regeneration script)."""
    raw = open(bible_data, "rb").read()
    (n,) = struct.unpack(">I", raw[0x58:0x5C])
    offsets = struct.unpack(f">{n + 1}I", raw[0x5C:0x5C + 4 * (n + 1)])
    return "\n".join(textwrap.wrap(base64.b64encode(raw[offsets[-2]:offsets[-1]]).decode(), 96))


def test_lzw_segment_decodes_to_the_known_text():
    text = corpus.decompress_lzw(KJV_LAST_SEGMENT)
    assert hashlib.sha256(text).hexdigest() == KJV_LAST_SEGMENT_TEXT_SHA256
    assert text.endswith(b"Rev22:21 The grace of our Lord Jesus Christ be with you all. Amen.\n")


@pytest.mark.skipif(shutil.which("gzip") is None, reason="gzip (an independent .Z decoder) missing")
def test_lzw_matches_gzip():
    ref = subprocess.run(["gzip", "-dc"], input=COMPRESS_HEADER + KJV_LAST_SEGMENT,
                         capture_output=True, check=True).stdout
    assert corpus.decompress_lzw(KJV_LAST_SEGMENT) == ref


def test_ec02_container_concatenates_segments(tmp_path):
    path = tmp_path / "bible.data"
    path.write_bytes(ec02_container([KJV_LAST_SEGMENT, KJV_LAST_SEGMENT]))
    one = corpus.decompress_lzw(KJV_LAST_SEGMENT).decode("latin-1")
    assert corpus.read_text(path) == one + one
    books = corpus.parse_books(corpus.read_text(path))
    assert [b.name for b in books] == ["Rev"]
    assert books[0].verses[-1] == "The grace of our Lord Jesus Christ be with you all. Amen."


def test_bad_inputs_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        corpus.read_text(tmp_path / "missing.data")
    with pytest.raises(ValueError, match="not an EC02"):
        corpus.decode_ec02(b"plain text")
    broken = bytearray(ec02_container([KJV_LAST_SEGMENT]))
    broken[0x5C:0x60] = struct.pack(">I", 7)  # first offset no longer after a compress header
    with pytest.raises(ValueError, match="inconsistent"):
        corpus.decode_ec02(bytes(broken))
    with pytest.raises(ValueError, match="no verse lines"):
        corpus.parse_books("just some words\nwithout references\n")


def synthetic_bible(n_books: int = 14, verses: int = 6) -> str:
    """A verse-per-line text in bible.data's layout: book b has words unique to it."""
    lines = ["Holy Bible, test layout."]
    for b in range(n_books):
        letter = chr(ord("a") + b)
        for v in range(verses):
            lines.append(f"Bk{letter}1:{v + 1} And w{letter * 3} said unto them, Go; the LORD's "
                         f"way {v % 3}.")
    return "\n".join(lines) + "\n"


def test_split_books_is_deterministic_and_disjoint():
    books = corpus.parse_books(synthetic_bible())
    splits = corpus.split_books(books)
    again = corpus.split_books(corpus.parse_books(synthetic_bible()))
    assert splits.names() == again.names()
    names = splits.names()
    assert names["evaluation"] == ["Bkg"] and names["calibration"] == ["Bkj"]
    every = names["train"] + names["calibration"] + names["evaluation"]
    assert sorted(every) == sorted(b.name for b in books)
    with pytest.raises(ValueError, match="distinct"):
        corpus.split_books(books, evaluation_slot=3, calibration_slot=3)


def test_tokenizer_words_punctuation_and_vocab_order():
    assert tokenizer.split_words("the LORD's way, 12 (Selah).") == [
        "the", "LORD's", "way", ",", "12", "(", "Selah", ")", "."]
    vocab = tokenizer.build_vocabulary(["b", "a", "b", "c", "a", "b"], max_vocab=4, pad_to=8)
    assert vocab.tokens[:4] == ("<unk>", "<nl>", "b", "a")  # count desc; 'c' cut by the cap
    assert len(vocab) == 8 and vocab.tokens[4] == "<reserved_0>"
    ids = vocab.encode(["a", "zzz", "<nl>"])
    assert ids.tolist() == [3, 0, 1]
    assert vocab.decode(ids) == ["a", "<unk>", "<nl>"]


def test_load_splits_is_deterministic(tmp_path):
    path = tmp_path / "bible.txt"
    path.write_text(synthetic_bible())
    first, second = data.load_splits(path), data.load_splits(path)
    assert first.vocab.tokens == second.vocab.tokens
    for name in ("train", "calibration", "evaluation"):
        assert torch.equal(getattr(first, name), getattr(second, name))
    # words of held-out books are not in the training vocabulary
    assert "wggg" not in first.vocab.tokens and "waaa" in first.vocab.tokens
    assert (first.evaluation == 0).any()
    vocab_path = tmp_path / "vocab.json"
    first.vocab.save(vocab_path)
    assert tokenizer.Vocabulary.load(vocab_path) == first.vocab


def test_batches_are_seeded_and_windows_fixed():
    tokens = torch.arange(1000)
    a = data.random_batch(tokens, 4, 16, torch.Generator().manual_seed(3))
    b = data.random_batch(tokens, 4, 16, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], a[0] + 1)
    inputs, targets = data.fixed_windows(tokens, 100)
    assert inputs.shape == (9, 100) and torch.equal(targets, inputs + 1)
    batches = data.calibration_batches(tokens, 100, batch=4, n_batches=2)
    assert [tuple(x.shape) for x in batches] == [(4, 100), (4, 100)]
    with pytest.raises(ValueError, match="too few"):
        data.random_batch(tokens[:10], 1, 16, torch.Generator())


if __name__ == "__main__":
    print(cut_fixture(sys.argv[1]))
